"""Episodic memory in ChromaDB: add, recall by similarity with metadata filters, forget.

Writes are synchronous (one reflection per task, not one per message as in the pool), so an
entry is durable when ``add`` returns and the next process to open the store sees it. Entries
live in their own collection under ``<data dir>/memory/chroma`` (or on a Chroma server), embedded
with the pool's offline MiniLM. A local store is open in one process at a time
(:mod:`critiquelab.runtime.pool.store_lock`): ``close`` lets the next one in.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.core.read_only_sqlite import query_read_only
from critiquelab.runtime.memory.entries import (
    AUDIENCE_PREFIX,
    MEMORY_TYPES,
    MemoryEntry,
    from_record,
    to_record,
)
from critiquelab.runtime.pool.embedder import Embedder, MiniLMEmbedder
from critiquelab.runtime.pool.store_lock import close_then_release, lock_existing_store, lock_store


@dataclass(frozen=True)
class Recalled:
    """A recalled entry and its cosine distance to the query (0 = same direction)."""

    entry: MemoryEntry
    distance: float


def _client(path: Path | None, url: str | None) -> Any:
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if url is not None:
        from critiquelab.runtime.pool.chroma_store import _make_client

        return _make_client(None, url)
    try:
        return chromadb.PersistentClient(path=str(path), settings=settings)
    except Exception as exc:
        raise UserError(f"cannot open the memory store in {path}: {exc}") from exc


def stored_collections(path: Path | str) -> dict[str, int]:
    """The memory stores (Chroma collections) in ``path`` and how many entries each holds, read
    from Chroma's SQLite file opened read-only (see :func:`_query_store`)."""
    # An entry is a row of the collection's metadata segment (Chroma applies writes to it before
    # ``add`` returns); a collection without rows is an empty store.
    query = """
        SELECT c.name, COUNT(e.id) FROM collections c
        LEFT JOIN segments s ON s.collection = c.id AND s.scope = 'METADATA'
        LEFT JOIN embeddings e ON e.segment_id = s.id
        GROUP BY c.name
    """
    return {str(name): int(count) for name, count in _query_store(path, query)}


def stored_task_ids(path: Path | str, collection: str, run_id: str) -> set[str]:
    """The tasks run ``run_id`` wrote entries for in the store ``collection`` under ``path``,
    read-only, so that a warm start refused for a run that wrote nothing, or for problems it
    learned on, leaves the store as it found it."""
    # An entry's metadata rows: its run and its task, keyed by the embedding's row id.
    query = """
        SELECT DISTINCT task.string_value FROM collections c
        JOIN segments s ON s.collection = c.id AND s.scope = 'METADATA'
        JOIN embeddings e ON e.segment_id = s.id
        JOIN embedding_metadata run ON run.id = e.id AND run.key = 'run_id'
        JOIN embedding_metadata task ON task.id = e.id AND task.key = 'task_id'
        WHERE c.name = ? AND run.string_value = ?
    """
    return {str(task_id) for (task_id,) in _query_store(path, query, (collection, run_id))}


def served_task_ids(url: str, collection: str, run_id: str) -> set[str]:
    """:func:`stored_task_ids` for a store on a Chroma server, found without creating it."""
    client = _client(None, url)
    try:
        if collection not in {found.name for found in client.list_collections()}:
            return set()
        found = client.get_collection(collection, embedding_function=None).get(
            where={"run_id": run_id}, include=["metadatas"])
        return {str(metadata["task_id"]) for metadata in found["metadatas"]}
    finally:
        close_then_release(client, None)  # its HTTP connections; a server store holds no lock


def _query_store(path: Path | str, query: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows ``query`` selects from the Chroma store in ``path``, its SQLite file opened
    read-only (none when there is no file yet): opening a Chroma client writes to that file (its
    sysdb records every open), so a command refused for an unknown or empty store would not
    leave the store as it found it. Refused like an open if another process holds the store."""
    database = Path(path) / "chroma.sqlite3"
    lock = lock_existing_store(path)  # creates nothing; None: never locked, so nobody holds it
    try:
        if not database.is_file():
            return []
        tables = {name for (name,) in query_read_only(
            database, "SELECT name FROM sqlite_master WHERE type = 'table'")}
        # Chroma records its schema migrations in every store it creates; a database that only
        # has tables of the queried names is foreign, and opening it, Chroma would migrate it.
        if "migrations" not in tables:
            raise UserError(f"the memory store {database.parent} is not a Chroma store (no "
                            "migrations table): move it aside, or pass --home")
        return query_read_only(database, query, parameters)
    except sqlite3.Error as exc:
        raise UserError(f"cannot read the memory store {database.parent}: {exc}") from exc
    finally:
        if lock is not None:
            lock.release()


class EpisodicStore:
    """Memory entries in one Chroma collection; thread-safe."""

    def __init__(
        self, path: Path | str | None = None, *, url: str | None = None, collection: str,
        embedder: Embedder | None = None,
    ) -> None:
        if (path is None) == (url is None):
            raise ValueError("EpisodicStore needs a directory (path) or a Chroma server (url)")
        # A local store: refused at once if another process has it open.
        self._store_lock = lock_store(path) if path is not None else None
        self._client: Any = None
        try:
            self._client = _client(Path(path) if path is not None else None, url)
            self._collection = self._client.get_or_create_collection(
                collection, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        except BaseException:
            self.close()
            raise
        self._embed = embedder or MiniLMEmbedder()
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the client, then release the store's lock (idempotent)."""
        client, self._client = self._client, None
        close_then_release(client, self._store_lock)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of ``texts`` from the store's embedder (so skills are ranked in the same space)."""
        return self._embed(texts)

    def add(self, entry: MemoryEntry) -> MemoryEntry:
        [vector] = self._embed([entry.content])
        entry_id, document, metadata = to_record(entry)
        with self._lock:
            self._collection.upsert(ids=[entry_id], documents=[document], metadatas=[metadata],
                                    embeddings=[vector])
        return entry

    def update(self, entry: MemoryEntry) -> None:
        """Rewrite an entry's metadata (document and vector unchanged). Removing an audience
        role needs the key set to False, since Chroma merges metadata."""
        _, _, metadata = to_record(entry)
        old = self.get(entry.id)
        for role in set(old.audience if old else []) - set(entry.audience):
            metadata[f"{AUDIENCE_PREFIX}{role}"] = False
        with self._lock:
            self._collection.update(ids=[entry.id], metadatas=[metadata])

    def get(self, entry_id: str) -> MemoryEntry | None:
        found = self._collection.get(ids=[entry_id], include=["documents", "metadatas"])
        if not found["ids"]:
            return None
        return from_record(found["ids"][0], found["documents"][0], found["metadatas"][0])

    def all(self, *, include_deprecated: bool = True) -> list[MemoryEntry]:
        """Every entry, oldest first."""
        found = self._collection.get(
            where=None if include_deprecated else {"deprecated": False}, include=["documents", "metadatas"]
        )
        records = zip(found["ids"], found["documents"], found["metadatas"], strict=True)
        entries = [from_record(i, d, m) for i, d, m in records]
        return sorted(entries, key=lambda e: (e.created_at, e.id))

    def count(self) -> int:
        return int(self._collection.count())

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored embedding of each id (for consolidation)."""
        if not ids:
            return {}
        found = self._collection.get(ids=list(ids), include=["embeddings"])
        return {i: [float(x) for x in v] for i, v in zip(found["ids"], found["embeddings"], strict=True)}

    def recall(
        self, query: str, *, role: str | None = None, type: str | None = None,
        tags: Sequence[str] = (), k: int = 5, audience: str | None = None,
        run_ids: Sequence[str] | None = None, include_deprecated: bool = False, touch: bool = True,
        max_distance: float | None = None, exclude_types: Sequence[str] = (), not_task: str | None = None,
    ) -> list[Recalled]:
        """The ``k`` entries most similar to ``query``, best first, that match every filter:
        written about ``role``, of ``type`` and of none of ``exclude_types``, carrying all
        ``tags``, recallable by ``audience`` (a role), written by one of ``run_ids``, not on task
        ``not_task``, no farther than ``max_distance``. ``touch`` counts the retrieval on each
        entry returned."""
        for name in (type, *exclude_types):
            if name is not None and name not in MEMORY_TYPES:
                raise UserError(f"memory type '{name}' is unknown; allowed: {', '.join(MEMORY_TYPES)}")
        if k <= 0:
            return []
        clauses: list[dict[str, Any]] = []
        if not include_deprecated:
            clauses.append({"deprecated": False})
        if role is not None:
            clauses.append({"role": role})
        if type is not None:
            clauses.append({"type": type})
        clauses += [{"type": {"$ne": name}} for name in exclude_types]
        if not_task is not None:
            clauses.append({"task_id": {"$ne": not_task}})
        if audience is not None:
            clauses.append({f"{AUDIENCE_PREFIX}{audience}": True})
        if run_ids is not None:
            clauses.append({"run_id": {"$in": list(run_ids)}})
        where = None if not clauses else clauses[0] if len(clauses) == 1 else {"$and": clauses}
        total = self.count()
        if total == 0:
            return []
        [vector] = self._embed([query])
        # Tags are a JSON list in the metadata: filter them here, over-fetching to keep k results.
        fetch = min(total, k if not tags else max(k * 10, 50))
        found = self._collection.query(
            query_embeddings=[vector], n_results=fetch, where=where,
            include=["documents", "metadatas", "distances"],
        )
        recalled = [
            Recalled(from_record(i, d, m), float(dist))
            for i, d, m, dist in zip(found["ids"][0], found["documents"][0], found["metadatas"][0],
                                     found["distances"][0], strict=True)
        ]
        wanted = set(tags)
        recalled = [r for r in recalled if wanted <= set(r.entry.tags)
                    and (max_distance is None or r.distance <= max_distance)][:k]
        if touch:
            self.touch([r.entry for r in recalled])
        return recalled

    def touch(self, entries: Sequence[MemoryEntry]) -> None:
        """Count a retrieval on each of ``entries`` (what consolidation and decay read)."""
        if not entries:
            return
        now = time.time()
        for entry in entries:
            entry.last_retrieved = now
            entry.retrieval_count += 1
        with self._lock:
            self._collection.update(
                ids=[e.id for e in entries],
                metadatas=[{"last_retrieved": now, "retrieval_count": e.retrieval_count} for e in entries],
            )

    def forget_before(self, when: float) -> int:
        """Delete entries created before ``when`` (Unix time); returns how many."""
        with self._lock:
            found = self._collection.get(where={"created_at": {"$lt": float(when)}}, include=[])
            if found["ids"]:
                self._collection.delete(ids=list(found["ids"]))
        return len(found["ids"])

    def forget_task(self, run_id: str, task_id: str) -> list[str]:
        """Delete what run ``run_id`` wrote on ``task_id``; returns the deleted ids."""
        with self._lock:
            found = self._collection.get(where={"$and": [{"run_id": run_id}, {"task_id": task_id}]},
                                         include=[])
            if found["ids"]:
                self._collection.delete(ids=list(found["ids"]))
        return list(found["ids"])

    def runs_of(self, ids: Sequence[str]) -> dict[str, str]:
        """The run that wrote each of ``ids`` (entries no longer stored are absent)."""
        if not ids:
            return {}
        found = self._collection.get(ids=list(set(ids)), include=["metadatas"])
        return {i: str(m.get("run_id", "")) for i, m in zip(found["ids"], found["metadatas"], strict=True)}

