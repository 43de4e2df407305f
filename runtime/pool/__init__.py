"""The message pool: typed messages, the in-process pool, and its persistent stores.

Agents communicate only through this pool. :mod:`.messages` defines the message,
:mod:`.message_pool` the pool (publish, subscribe, history, query, search), :mod:`.store` the
storage protocol, :mod:`.chroma_store` its ChromaDB implementation and :mod:`.chroma_process`
the same store run in a child process, :mod:`.store_lock` the lock that keeps a local store to
one process; :mod:`.context` lets the runner hand a pool to pipelines without a global.
"""
