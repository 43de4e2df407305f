"""Cross-agent sharing: an entry one role wrote is proposed to the roles that benefit from it
(``share_to``), and reaches their prompts once a proposal is approved (by a researcher with
`critiquelab memory approve`, or at once with ``approval: auto``)."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from critiquelab.core.errors import UserError
from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.episodic import EpisodicStore

Status = Literal["pending", "approved", "rejected"]


class Proposal(BaseModel):
    id: str = Field(default_factory=lambda: f"p-{uuid.uuid4().hex[:10]}")
    entry_id: str
    from_role: str
    to_role: str
    summary: str = Field(description="The entry's content, shortened.")
    status: Status = "pending"
    created_at: float = Field(default_factory=time.time)
    decided_at: float = 0.0


def _row_proposal(row: sqlite3.Row) -> Proposal:
    return Proposal(**{k: v for k, v in dict(row).items() if k != "store"})


class Proposals:
    """Proposals of one memory store, in the memory database."""

    def __init__(self, connection: sqlite3.Connection, store: str, episodic: EpisodicStore) -> None:
        self._db = connection
        self._store = store
        self._episodic = episodic
        self._lock = threading.Lock()

    def propose(
        self, entry: MemoryEntry, share_to: Mapping[str, Sequence[str]], *, auto_approve: bool
    ) -> list[Proposal]:
        """One proposal per beneficiary of ``entry.role``; approved at once with ``auto_approve``."""
        made = []
        for role in share_to.get(entry.role, ()):
            if role == entry.role:
                continue
            proposal = Proposal(entry_id=entry.id, from_role=entry.role, to_role=role,
                                summary=" ".join(entry.content.split())[:200])
            with self._lock:
                self._db.execute(
                    "INSERT INTO proposals (id, store, entry_id, from_role, to_role, summary, status, "
                    "created_at, decided_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, 0)",
                    (proposal.id, self._store, proposal.entry_id, proposal.from_role, proposal.to_role,
                     proposal.summary, proposal.created_at),
                )
            made.append(self.decide(proposal.id, approve=True) if auto_approve else proposal)
        return made

    def forget(self, entry_ids: Sequence[str]) -> None:
        """Delete the proposals of ``entry_ids`` (entries no longer stored)."""
        with self._lock:
            for entry_id in entry_ids:
                self._db.execute("DELETE FROM proposals WHERE store = ? AND entry_id = ?",
                                 (self._store, entry_id))

    def list(self, status: Status | None = "pending") -> list[Proposal]:
        query, args = "SELECT * FROM proposals WHERE store = ?", [self._store]
        if status is not None:
            query += " AND status = ?"
            args.append(status)
        rows = self._db.execute(query + " ORDER BY created_at", args).fetchall()
        return [_row_proposal(row) for row in rows]

    def get(self, proposal_id: str) -> Proposal | None:
        row = self._db.execute(
            "SELECT * FROM proposals WHERE store = ? AND id = ?", (self._store, proposal_id)
        ).fetchone()
        return _row_proposal(row) if row else None

    def decide(self, proposal_id: str, *, approve: bool) -> Proposal:
        """Approve (the entry becomes recallable by the beneficiary role) or reject."""
        proposal = self.get(proposal_id)
        if proposal is None:
            raise UserError(f"no proposal '{proposal_id}' in memory store '{self._store}'")
        entry = self._episodic.get(proposal.entry_id)
        if entry is not None:
            audience = set(entry.audience)
            audience = audience | {proposal.to_role} if approve else audience - {proposal.to_role}
            if audience != set(entry.audience):
                entry.audience = sorted(audience)
                self._episodic.update(entry)
        with self._lock:
            self._db.execute(
                "UPDATE proposals SET status = ?, decided_at = ? WHERE store = ? AND id = ?",
                ("approved" if approve else "rejected", time.time(), self._store, proposal_id),
            )
        decided = self.get(proposal_id)
        assert decided is not None  # found above
        return decided
