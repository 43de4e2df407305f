"""What the message pool needs from a persistent store, and the filter/record rules they share.

The pool (:mod:`critiquelab.runtime.pool.message_pool`) keeps this session's messages in memory and hands each
one to an optional :class:`PoolStore` for persistence. Keeping the contract small lets the pool run
purely in memory (tests, notebooks, DSPy compilation) and lets the Chroma store
(:mod:`critiquelab.runtime.pool.chroma_store`) stay an implementation detail.

Filters are equality on a fixed set of fields plus a half-open time range on ``created_at``;
the in-memory pool and every store must apply them identically, so both use the helpers here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.messages import Message, intent_of

#: Key of the publish sequence number in ``Message.metadata`` (and in a store record).
SEQ_KEY = "seq"

#: The fields ``query``/``get``/``search`` accept as equality filters.
FILTER_FIELDS = ("intent", "sender", "recipient", "task_id", "thread_id", "run_id")


def seq_of(message: Message) -> int:
    """The publish sequence number the pool gave ``message``.

    Sequence numbers are a hybrid clock (see ``MessagePool.publish``): nanoseconds since the
    epoch, forced strictly increasing within a pool. A message that never went through a pool
    falls back to its ``created_at`` in the same unit, so mixed lists still sort sensibly.
    """
    seq = message.metadata.get(SEQ_KEY)
    if isinstance(seq, int) and not isinstance(seq, bool):
        return seq
    return int(message.created_at * 1e9)


def check_where(where: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate equality filters; unknown fields are a user error (usually a typo in a caller)."""
    if not where:
        return {}
    unknown = sorted(set(where) - set(FILTER_FIELDS))
    if unknown:
        raise UserError(
            f"message pool: cannot filter on {', '.join(unknown)}; "
            f"filterable fields: {', '.join(FILTER_FIELDS)}"
        )
    for key, value in where.items():
        if value is not None and not isinstance(value, str):
            raise UserError(f"message pool: filter {key}={value!r} must be a string (or None for recipient)")
    # An Intent is a str: kept as its plain value, which is what a store holds and matches on.
    return {key: str(value) if isinstance(value, str) else value for key, value in where.items()}


def matches(
    message: Message, where: Mapping[str, Any], since: float | None = None, until: float | None = None
) -> bool:
    """Whether ``message`` passes already-validated filters; the time range is ``[since, until)``."""
    if since is not None and message.created_at < since:
        return False
    if until is not None and message.created_at >= until:
        return False
    return all(getattr(message, key) == value for key, value in where.items())


def sort_messages(messages: Iterable[Message]) -> list[Message]:
    """Publish order: by sequence number, ties (only possible across writers) by id for stability."""
    return sorted(messages, key=lambda m: (seq_of(m), m.id))


# --- flat records, for stores whose metadata values must be str/int/float/bool (Chroma) ------


def to_record(message: Message) -> tuple[str, str, dict[str, str | int | float | bool]]:
    """``(id, document, metadata)`` for a flat-metadata store.

    The document is ``summary + "\\n\\n" + content`` — what semantic search should match. The
    summary is kept in the metadata too, so :func:`from_record` can split the document back
    without guessing where a multi-paragraph summary ends. ``None`` becomes ``""`` and the
    message's own ``metadata`` dict a JSON string (values JSON cannot hold are stored as their
    ``str``, rather than losing the message in a background writer).
    """
    record: dict[str, str | int | float | bool] = {
        "task_id": message.task_id,
        "thread_id": message.thread_id,
        "intent": message.intent.value,
        "sender": message.sender,
        "recipient": message.recipient or "",
        "summary": message.summary,
        "in_reply_to": message.in_reply_to or "",
        "created_at": float(message.created_at),
        "run_id": message.run_id,
        SEQ_KEY: seq_of(message),
        "metadata": json.dumps(message.metadata, default=str),
    }
    return message.id, f"{message.summary}\n\n{message.content}", record


def from_record(record_id: str, document: str | None, record: Mapping[str, Any]) -> Message:
    """Inverse of :func:`to_record`."""
    summary = str(record.get("summary", ""))
    document = document or ""
    prefix = f"{summary}\n\n"
    content = document[len(prefix):] if document.startswith(prefix) else document
    extras = json.loads(record.get("metadata") or "{}")
    return Message(
        id=record_id,
        task_id=str(record.get("task_id", "")),
        thread_id=str(record.get("thread_id", "")),
        intent=intent_of(str(record.get("intent", "")), record_id),
        sender=str(record.get("sender", "")),
        recipient=record.get("recipient") or None,
        summary=summary,
        content=content,
        in_reply_to=record.get("in_reply_to") or None,
        created_at=float(record.get("created_at", 0.0)),
        run_id=str(record.get("run_id", "")),
        metadata=extras,
    )


@runtime_checkable
class PoolStore(Protocol):
    """Persistence behind a :class:`~critiquelab.runtime.pool.MessagePool`.

    ``add`` is on the agents' hot path and must return at once (queue the work); everything
    else may block. Implementations must be thread-safe.
    """

    #: Whether :meth:`search` works (the store computes embeddings).
    searchable: bool

    def add(self, message: Message) -> None:
        """Queue ``message`` for persistence; must not block on I/O or embedding."""
        ...

    def get(
        self,
        where: Mapping[str, Any] | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> list[Message]:
        """Persisted messages matching the filters, in publish order (pending ones may be missing)."""
        ...

    def search(self, text: str, *, where: Mapping[str, Any] | None = None, k: int = 5) -> list[Message]:
        """The ``k`` messages most similar to ``text``, best first."""
        ...

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything added so far is persisted; raise if some of it failed."""
        ...

    def close(self) -> None:
        """Flush and release resources; idempotent."""
        ...
