"""ChromaDB persistence for the message pool, written off the agents' hot path.

Why a background writer: writing to Chroma costs milliseconds and embedding a message (MiniLM
on CPU) 30–70 ms, and agents publish between LM calls. ``add`` only appends to a queue; one
daemon thread batches what has accumulated and upserts it. ``flush`` waits for the queue to
drain, ``close`` flushes and stops the thread, and an ``atexit`` hook (holding only a weak
reference) flushes whatever a caller forgot to close on a normal interpreter exit.

Persist now, index lazily: a record is first written with a placeholder vector and
``_indexed: False`` — cheap, and durable at once — and an indexer thread embeds records once
the pool has been quiet for a moment (with a real model, during LM calls). ``flush``/``close``
wait only for the durable write, never for a model load or an embedding (measured: waiting for
them made a cached critic-loop run 2.5× slower); ``search`` first embeds whatever is still
unindexed, including records an earlier process left unindexed.

chromadb and sentence-transformers are imported inside functions: importing this module must
stay cheap for code that never persists anything.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.embedder import Embedder, MiniLMEmbedder
from critiquelab.runtime.pool.messages import Message
from critiquelab.runtime.pool.store import check_where, from_record, sort_messages, to_record
from critiquelab.runtime.pool.store_lock import StoreLock, close_then_release, lock_store

log = logging.getLogger(__name__)

DEFAULT_COLLECTION = "critiquelab_messages"
INDEXED_KEY = "_indexed"  # Chroma metadata flag: False while the record has a placeholder vector
INDEX_BATCH = 8
# Embed only after the pool has been quiet this long: during LM calls, not between agent steps.
QUIET_S = 0.5
LINGER_S = 0.25


def _make_client(path: Path | None, url: str | None) -> Any:
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if url is None:
        if path is None:  # the data directory is the runner's business (experiments/paths.py)
            raise ValueError("ChromaPoolStore needs a directory (path) or a Chroma server (url)")
        try:
            return chromadb.PersistentClient(path=str(path), settings=settings)
        except Exception as exc:
            raise UserError(
                f"cannot open the message store in {path}: {exc}; move it aside or run with "
                "`pool: {persist: false}`"
            ) from exc
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UserError(f"Chroma server URL '{url}' is not http(s)://host[:port]")
    ssl = parsed.scheme == "https"
    port = parsed.port or (443 if ssl else 8000)
    try:
        client = chromadb.HttpClient(host=parsed.hostname, port=port, ssl=ssl, settings=settings)
        client.heartbeat()
    except Exception as exc:
        raise UserError(f"cannot reach the Chroma server at {url}: {exc}; is `chroma run` up?") from exc
    return client


def check_chroma_server(url: str) -> None:
    """A :class:`UserError` now if the Chroma server at ``url`` does not answer: a start that
    needs it is refused before anything is written."""
    _make_client(None, url)


def _chroma_where(
    where: Mapping[str, Any] | None, since: float | None, until: float | None
) -> dict[str, Any] | None:
    clauses: list[dict[str, Any]] = [
        {key: ("" if value is None else value)} for key, value in check_where(where).items()
    ]
    if since is not None:
        clauses.append({"created_at": {"$gte": float(since)}})
    if until is not None:
        clauses.append({"created_at": {"$lt": float(until)}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class ChromaPoolStore:
    """A :class:`~critiquelab.runtime.pool.store.PoolStore` over a Chroma collection.

    ``ChromaPoolStore(path)`` opens a ``PersistentClient`` on ``path`` (default:
    ``<data dir>/chroma``); ``ChromaPoolStore(url="http://host:8000")`` talks to a Chroma server
    instead. Records are keyed by message id and upserted, so re-adding a message is harmless.
    """

    searchable = True

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        url: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        batch_size: int = 64,
    ):
        if path is not None and url is not None:
            raise UserError("ChromaPoolStore: give a directory or a server URL, not both")
        # A local store: refused at once if another process has it open (runtime/pool/store_lock.py).
        self._store_lock: StoreLock | None = lock_store(path) if path is not None else None
        self._client: Any = None
        try:
            self._client = _make_client(Path(path) if path is not None else None, url)
            self._collection = self._client.get_or_create_collection(
                collection, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        except ValueError as exc:
            self._let_go()
            raise UserError(f"Chroma collection '{collection}': {exc}") from exc
        except BaseException:
            self._let_go()
            raise
        self._embed: Embedder = embedder or MiniLMEmbedder()
        self._batch_size = batch_size
        self._queue: deque[Message] = deque()
        self._cond = threading.Condition()
        self._unwritten = 0  # queued or being written
        self._failures: list[tuple[int, BaseException]] = []
        self._to_index: deque[str] = deque()  # written with a placeholder vector, not yet embedded
        self._index_lock = threading.Lock()  # one indexing pass at a time (indexer or search)
        self._chroma_lock = threading.Lock()  # held by the indexer around its Chroma calls
        self._index_closed = False
        self._placeholder: list[float] | None = None
        self._last_add = 0.0
        self._flushing = 0  # callers waiting in flush(): the writer must not linger
        self._closed = False
        self._stopping = False
        self._writer = threading.Thread(target=self._run, name=f"pool-writer-{collection}", daemon=True)
        self._indexer = threading.Thread(
            target=self._index_in_quiet_moments, name=f"pool-indexer-{collection}", daemon=True
        )
        self._writer.start()
        self._indexer.start()
        ref = weakref.ref(self)

        def flush_at_exit() -> None:
            store = ref()
            if store is not None:
                store.close()

        self._atexit_hook = flush_at_exit
        atexit.register(flush_at_exit)

    # --- hot path ---------------------------------------------------------------------------

    def add(self, message: Message) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("ChromaPoolStore is closed")
            self._queue.append(message)
            self._unwritten += 1
            self._last_add = time.monotonic()
            self._cond.notify_all()

    # --- writer thread ----------------------------------------------------------------------

    def _run(self) -> None:
        """The writer thread: writes batches as they accumulate."""
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return  # stopping, and everything is written
                # Linger briefly so several messages share one upsert (each has a fixed cost);
                # flush() and close() cut the wait short.
                deadline = time.monotonic() + LINGER_S
                while (
                    len(self._queue) < self._batch_size and not self._stopping and not self._flushing
                    and (remaining := deadline - time.monotonic()) > 0
                ):
                    self._cond.wait(remaining)
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), self._batch_size))]
            error = self._write_with_retry(batch)
            with self._cond:
                if error is not None:
                    self._failures.append((len(batch), error))
                self._unwritten -= len(batch)
                self._cond.notify_all()

    def _index_in_quiet_moments(self) -> None:
        """The indexer thread: embeds written records once the pool has been quiet for a moment.

        It is never joined: ``close`` only waits for a Chroma call in flight (under
        ``_chroma_lock``), not for a model load or an embedding, and records left unindexed
        are caught up by the next ``search``."""
        while True:
            with self._cond:
                while not self._to_index and not self._index_closed:
                    self._cond.wait()
                if self._index_closed:
                    return
                quiet_for = time.monotonic() - self._last_add
                if quiet_for < QUIET_S:  # agents are busy publishing: do not compete for CPU
                    self._cond.wait(QUIET_S - quiet_for)
                    continue
            try:
                # Small batches: a search catching up waits for the one in progress.
                self._index_some(INDEX_BATCH)
            except Exception as exc:  # search() catches up later; never kill the indexer
                if self._index_closed:
                    return
                log.warning("message pool: embedding deferred: %s", exc)
                with self._cond:
                    self._cond.wait(1.0)

    def _write_with_retry(self, batch: list[Message]) -> BaseException | None:
        error: BaseException | None = None
        for _attempt in range(2):
            try:
                self._write(batch)
                return None
            except Exception as exc:
                error = exc
        log.error("message pool: could not persist %d messages: %s", len(batch), error)
        return error

    def _write(self, batch: Sequence[Message]) -> None:
        ids, documents, metadatas = zip(*(to_record(m) for m in batch), strict=True)
        placeholder = self._placeholder_vector()
        self._open_collection().upsert(
            ids=list(ids), documents=list(documents),
            metadatas=[{**m, INDEXED_KEY: False} for m in metadatas],
            embeddings=[placeholder] * len(ids),
        )
        with self._cond:
            self._to_index.extend(ids)
            self._cond.notify_all()

    def _placeholder_vector(self) -> list[float]:
        """A fixed unit vector of the embedder's dimension (cosine space rejects zero vectors)."""
        if self._placeholder is None:
            dimension = getattr(self._embed, "dimension", None) or len(self._embed(["dimension probe"])[0])
            self._placeholder = [1.0] + [0.0] * (dimension - 1)
        return self._placeholder

    def _index_some(self, limit: int) -> int:
        """Embed up to ``limit`` records written by this store that are still unindexed."""
        with self._index_lock:
            with self._cond:
                ids = [self._to_index.popleft() for _ in range(min(limit, len(self._to_index)))]
            if ids:
                self._index_ids(ids)
            return len(ids)

    def _index_ids(self, ids: list[str]) -> None:
        collection = self._open_collection()
        with self._chroma_lock:
            if self._index_closed:
                return
            found = collection.get(ids=ids, include=["documents", "metadatas"])
        if not found["ids"]:
            return
        vectors = self._embed(list(found["documents"]))  # slow, and outside the lock: close never waits
        with self._chroma_lock:
            if self._index_closed:
                return  # closing: they stay unindexed until a search catches up
            collection.update(
                ids=found["ids"], embeddings=vectors,
                metadatas=[{**m, INDEXED_KEY: True} for m in found["metadatas"]],
            )

    def _catch_up_index(self) -> None:
        """Embed every unindexed record: this store's backlog and earlier processes' leftovers."""
        while self._index_some(self._batch_size):
            pass
        with self._index_lock:
            collection = self._open_collection()
            while True:
                stale = collection.get(where={INDEXED_KEY: False}, limit=self._batch_size, include=[])
                if not stale["ids"]:
                    return
                self._index_ids(list(stale["ids"]))

    # --- reads ------------------------------------------------------------------------------

    def get(
        self,
        where: Mapping[str, Any] | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> list[Message]:
        """Persisted messages matching the filters, in publish order.

        Reads what the writer has written so far; call :meth:`flush` first to include messages
        still queued (the pool itself merges those from memory).
        """
        result = self._open_collection().get(
            where=_chroma_where(where, since, until), include=["documents", "metadatas"]
        )
        return sort_messages(
            from_record(i, d, m)
            for i, d, m in zip(result["ids"], result["documents"], result["metadatas"], strict=True)
        )

    def search(self, text: str, *, where: Mapping[str, Any] | None = None, k: int = 5) -> list[Message]:
        """The ``k`` most similar messages, best first. Flushes and embeds whatever is still
        unindexed first, so nothing published is missed."""
        self.flush()
        self._catch_up_index()
        if k <= 0:
            return []
        [query] = self._embed([text])
        result = self._open_collection().query(
            query_embeddings=[query],
            n_results=k,
            where=_chroma_where(where, None, None),
            include=["documents", "metadatas"],
        )
        return [
            from_record(i, d, m)
            for i, d, m in zip(result["ids"][0], result["documents"][0], result["metadatas"][0], strict=True)
        ]

    def count(self) -> int:
        """Records persisted so far."""
        return int(self._open_collection().count())

    def _open_collection(self) -> Any:
        collection = self._collection
        if collection is None:
            raise RuntimeError("ChromaPoolStore is closed")
        return collection

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Messages added but not yet persisted."""
        with self._cond:
            return self._unwritten

    def flush(self, timeout: float | None = None) -> None:
        """Block until every message added so far is persisted.

        Raises ``TimeoutError`` if that takes longer than ``timeout`` seconds, and
        ``RuntimeError`` (once) if the writer failed to persist some messages since the last flush.
        """
        with self._cond:
            if threading.current_thread() is self._writer:
                return
            self._flushing += 1
            self._cond.notify_all()
            try:
                drained = self._cond.wait_for(lambda: self._unwritten == 0, timeout)
            finally:
                self._flushing -= 1
            if not drained:
                raise TimeoutError(
                    f"message pool: {self._unwritten} messages still unwritten after {timeout}s"
                )
            failures, self._failures = self._failures, []
        if failures:
            lost, first = sum(n for n, _ in failures), failures[0][1]
            raise RuntimeError(f"message pool: {lost} messages could not be persisted: {first}") from first

    def close(self) -> None:
        """Flush, stop the writer and release the client; idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self._atexit_hook)
        try:
            self.flush()
        finally:
            with self._cond:
                self._stopping = True
                self._cond.notify_all()
            self._writer.join()
            with self._chroma_lock, self._cond:  # waits for an indexer call in flight, not for embedding
                self._index_closed = True
                self._cond.notify_all()
            self._collection = None
            self._let_go()

    def _let_go(self) -> None:
        client, self._client = self._client, None
        close_then_release(client, self._store_lock)

    def __enter__(self) -> ChromaPoolStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["DEFAULT_COLLECTION", "ChromaPoolStore"]
