"""The message pool: the only channel agents communicate through.

Agents publish :class:`~critiquelab.runtime.pool.messages.Message`s; the pool stamps each with a sequence
number, delivers it to the queues of the agents whose subscriptions match, keeps it for
``history``/``query``, and hands it to an optional :class:`~critiquelab.runtime.pool.store.PoolStore`
for persistence. With no store the pool is purely in memory (tests, notebooks, DSPy compiling).

Design notes (the *why*):

* Publishing is on the agents' hot path, so it only takes an in-process lock; the store
  queues the expensive work (embedding, Chroma writes) for a background thread.
* Order must be total within a task even when ``created_at`` ties, and must survive reopening
  a store in a later process. ``seq`` is therefore a hybrid clock: ``time.time_ns()``, bumped to
  ``previous + 1`` when the clock has not moved. A later session's messages sort after an
  earlier one's without reading anything from the store at publish time.
* Delivery happens at publish time: a message published before an agent subscribes is not in
  its queue (it is still in ``history``). Reads merge this session's messages (from memory,
  so they are visible before the writer has persisted them) with the store's (earlier sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.pool.store import SEQ_KEY, PoolStore, check_where, matches, seq_of, sort_messages

__all__ = ["MessagePool", "Subscription", "seq_of"]


@dataclass(frozen=True)
class Subscription:
    """One filter an agent registered; a message is delivered if any of its subscriptions match."""

    intents: frozenset[Intent] | None = None
    task_id: str | None = None
    thread_id: str | None = None
    to_me_only: bool = False

    def accepts(self, agent: str, message: Message) -> bool:
        if message.sender == agent:
            return False  # an agent never hears itself
        if message.recipient is not None and message.recipient != agent:
            return False  # addressed to someone else
        if self.to_me_only and message.recipient != agent:
            return False  # broadcasts excluded
        if self.intents is not None and message.intent not in self.intents:
            return False
        if self.task_id is not None and message.task_id != self.task_id:
            return False
        return self.thread_id is None or message.thread_id == self.thread_id


class _Inbox:
    """One agent's pending messages, with waiters for both threads and asyncio tasks."""

    def __init__(self) -> None:
        self.items: deque[Message] = deque()
        self.cond = threading.Condition()
        self.async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def put(self, message: Message) -> None:
        with self.cond:
            self.items.append(message)
            self.cond.notify_all()
            waiters, self.async_waiters = self.async_waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # the waiter's loop has closed
                loop.call_soon_threadsafe(_wake, future)

    def pop(self, max_items: int | None) -> list[Message]:
        """Caller holds ``cond``."""
        count = len(self.items) if max_items is None else min(max_items, len(self.items))
        return [self.items.popleft() for _ in range(count)]


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class MessagePool:
    """Publish/subscribe over :class:`Message`, with history, queries and (via a store) search.

    Thread-safe. ``MessagePool()`` is in memory only; ``MessagePool(ChromaPoolStore(path))``
    also persists, and a new pool over the same directory sees earlier sessions' messages in
    ``history``/``query``/``search`` (read lazily, on each call, never at construction).
    The pool owns its store: ``close()`` closes it.
    """

    def __init__(self, store: PoolStore | None = None):
        self._store = store
        self._lock = threading.Lock()
        self._last_seq = 0
        self._log: list[Message] = []  # this session's messages, in publish order
        self._subscriptions: dict[str, list[Subscription]] = {}
        self._inboxes: dict[str, _Inbox] = {}
        self._new_threads: set[str] = set()  # minted by new_thread_id(): no earlier session has them
        self._closed = False

    @property
    def store(self) -> PoolStore | None:
        return self._store

    def new_thread_id(self) -> str:
        """A fresh thread id. Reads filtered to such a thread are answered from memory: a
        thread minted in this session cannot have messages from an earlier one, so the store
        is not asked (a store read costs milliseconds; the runner reads every thread back)."""
        thread_id = uuid.uuid4().hex
        with self._lock:
            self._new_threads.add(thread_id)
        return thread_id

    # --- publishing ---------------------------------------------------------------------------

    def publish(self, message: Message) -> Message:
        """Stamp, deliver and persist ``message``; returns the stamped copy the pool keeps.

        The caller's object is not modified: the pool stores a copy with ``metadata["seq"]``
        set (any caller-supplied ``seq`` is overwritten). Treat returned and delivered messages
        as read-only; they are shared between subscribers.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("MessagePool is closed")
            seq = max(time.time_ns(), self._last_seq + 1)
            self._last_seq = seq
            stamped = message.model_copy(update={"metadata": {**message.metadata, SEQ_KEY: seq}})
            self._log.append(stamped)
            for agent, subscriptions in self._subscriptions.items():
                if any(s.accepts(agent, stamped) for s in subscriptions):
                    self._inbox(agent).put(stamped)
            if self._store is not None:
                self._store.add(stamped)  # only queues: see PoolStore.add
        return stamped

    # --- subscriptions and queues ---------------------------------------------------------------

    def subscribe(
        self,
        agent: str,
        *,
        intents: Iterable[Intent] | None = None,
        task_id: str | None = None,
        thread_id: str | None = None,
        to_me_only: bool = False,
    ) -> None:
        """Deliver future matching messages to ``agent``'s queue.

        Several calls add alternatives (a message is delivered once if any matches). Messages
        addressed to another agent and the agent's own messages are never delivered; with
        ``to_me_only`` broadcasts are excluded too. An agent must subscribe to receive even
        messages addressed to it.
        """
        if isinstance(intents, str):
            intents = [Intent(intents)]  # a bare intent (a str) would otherwise be split into characters
        subscription = Subscription(
            intents=frozenset(intents) if intents is not None else None,
            task_id=task_id,
            thread_id=thread_id,
            to_me_only=to_me_only,
        )
        with self._lock:
            self._subscriptions.setdefault(agent, []).append(subscription)
            self._inbox(agent)

    def unsubscribe(self, agent: str) -> None:
        """Stop delivering to ``agent``; messages already queued stay takeable."""
        with self._lock:
            self._subscriptions.pop(agent, None)

    def _inbox(self, agent: str) -> _Inbox:
        """Caller holds ``self._lock``."""
        inbox = self._inboxes.get(agent)
        if inbox is None:
            inbox = self._inboxes[agent] = _Inbox()
        return inbox

    def pending(self, agent: str) -> int:
        """How many messages wait in ``agent``'s queue."""
        inbox = self._inboxes.get(agent)
        if inbox is None:
            return 0
        with inbox.cond:
            return len(inbox.items)

    def take(self, agent: str, max_items: int | None = None, timeout: float | None = 0.0) -> list[Message]:
        """Remove and return up to ``max_items`` pending messages, oldest first.

        Waits up to ``timeout`` seconds (``None``: indefinitely) for at least one; returns
        ``[]`` if none arrived.
        """
        _check_max_items(max_items)
        with self._lock:
            inbox = self._inbox(agent)
        with inbox.cond:
            if timeout is None or timeout > 0:
                inbox.cond.wait_for(lambda: bool(inbox.items), timeout)
            return inbox.pop(max_items)

    async def take_async(
        self, agent: str, max_items: int | None = None, timeout: float | None = None
    ) -> list[Message]:
        """:meth:`take` for asyncio code: awaits without blocking the event loop or a thread.

        The default ``timeout=None`` waits until something arrives (a non-blocking poll is
        ``timeout=0``); publishers in other threads wake the awaiting task.
        """
        _check_max_items(max_items)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        with self._lock:
            inbox = self._inbox(agent)
        while True:
            with inbox.cond:
                if inbox.items:
                    return inbox.pop(max_items)
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return []
                future: asyncio.Future[None] = loop.create_future()
                inbox.async_waiters.append((loop, future))
            try:
                await asyncio.wait_for(future, remaining)
            except TimeoutError:
                pass
            finally:
                with inbox.cond:
                    if (loop, future) in inbox.async_waiters:
                        inbox.async_waiters.remove((loop, future))

    # --- reads ----------------------------------------------------------------------------------

    def history(
        self, *, task_id: str | None = None, thread_id: str | None = None, run_id: str | None = None
    ) -> list[Message]:
        """Every message (this session's and, with a store, earlier ones) in publish order."""
        where = {k: v for k, v in (("task_id", task_id), ("thread_id", thread_id), ("run_id", run_id)) if v}
        return self.query(where)

    def query(
        self,
        where: Mapping[str, Any] | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages matching equality filters on intent/sender/recipient/task_id/thread_id/run_id
        (``recipient=None``: broadcasts) and ``since <= created_at < until``, in publish order;
        ``limit`` keeps the first ``limit`` of them."""
        filters = check_where(where)
        with self._lock:
            found = {m.id: m for m in self._log if matches(m, filters, since, until)}
            session_only = filters.get("thread_id") in self._new_threads
        if self._store is not None and not session_only:
            for message in self._store.get(filters, since=since, until=until):
                found.setdefault(message.id, message)  # this session's copy wins
        ordered = sort_messages(found.values())
        return ordered if limit is None else ordered[: max(limit, 0)]

    def search(self, text: str, *, where: Mapping[str, Any] | None = None, k: int = 5) -> list[Message]:
        """The ``k`` messages most similar in meaning to ``text``, best first.

        Needs a searchable store; flushes it first so just-published messages are found.
        """
        if self._store is None or not getattr(self._store, "searchable", False):
            raise UserError(
                "message pool: semantic search needs a store with embeddings, "
                "e.g. MessagePool(ChromaPoolStore(path)); this pool is in memory only"
            )
        return self._store.search(text, where=check_where(where), k=k)

    # --- lifecycle ------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything published so far is persisted (no-op without a store)."""
        if self._store is not None:
            self._store.flush(timeout)

    def close(self) -> None:
        """Flush and close the store; further publishes fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> MessagePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_max_items(max_items: int | None) -> None:
    if max_items is not None and max_items < 1:
        raise ValueError(f"max_items must be at least 1, got {max_items}")
