"""The skills library (semantic memory): patterns promoted from episodic entries.

Promotion: when an entry has ``promote_after - 1`` or more similar entries (cosine distance
under ``promote_distance``) from *other* tasks, the pattern becomes an unapproved skill, its
template the newest entry's lesson. Confidence is the Laplace estimate (succeeded + 1) / (used +
2) of the tasks that received the skill, where success is the final code passing every example
visible in the prompt (never the hidden tests). Only approved skills reach prompts unless the
memory's approval is ``auto``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence

from pydantic import BaseModel, Field

from critiquelab.core.errors import UserError
from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.episodic import EpisodicStore


class Skill(BaseModel):
    id: str = Field(default_factory=lambda: f"s-{uuid.uuid4().hex[:10]}")
    name: str = Field(description="A short name: the start of the lesson.")
    description: str = Field(description="What the skill says, in a sentence.")
    role: str = Field(description="The role it is for.")
    category: str = Field(description="The memory type it was promoted from.")
    template: str = Field(description="The text injected into prompts.")
    confidence: float = Field(default=0.5, description="(succeeded + 1) / (used + 2).")
    times_used: int = 0
    times_succeeded: int = 0
    source_task_ids: list[str] = Field(default_factory=list)
    source_entry_ids: list[str] = Field(default_factory=list)
    approved: bool = False
    rejected: bool = False
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)


def _row_skill(row: sqlite3.Row) -> Skill:
    data = dict(row)
    data.pop("store")
    data["source_task_ids"] = json.loads(data["source_task_ids"])
    data["source_entry_ids"] = json.loads(data["source_entry_ids"])
    data["approved"], data["rejected"] = bool(data["approved"]), bool(data["rejected"])
    return Skill(**data)


class SkillLibrary:
    """Skills of one memory store, in the memory database."""

    def __init__(self, connection: sqlite3.Connection, store: str) -> None:
        self._db = connection
        self._store = store
        self._lock = threading.Lock()

    def add(self, skill: Skill) -> Skill:
        data = skill.model_dump()
        data["source_task_ids"] = json.dumps(data["source_task_ids"])
        data["source_entry_ids"] = json.dumps(data["source_entry_ids"])
        columns = ["store", *data]
        with self._lock:
            self._db.execute(
                f"INSERT OR REPLACE INTO skills ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' * len(columns))})",
                [self._store, *data.values()],
            )
        return skill

    def get(self, skill_id: str) -> Skill | None:
        row = self._db.execute(
            "SELECT * FROM skills WHERE store = ? AND id = ?", (self._store, skill_id)
        ).fetchone()
        return _row_skill(row) if row else None

    def list(self, *, role: str | None = None, approved_only: bool = False) -> list[Skill]:
        """Skills (never rejected ones), most confident first."""
        query = "SELECT * FROM skills WHERE store = ? AND rejected = 0"
        args: list[object] = [self._store]
        if role is not None:
            query += " AND role = ?"
            args.append(role)
        if approved_only:
            query += " AND approved = 1"
        rows = self._db.execute(query + " ORDER BY confidence DESC, created_at", args).fetchall()
        return [_row_skill(row) for row in rows]

    def decide(self, skill_id: str, *, approve: bool) -> Skill:
        skill = self.get(skill_id)
        if skill is None:
            raise UserError(f"no skill '{skill_id}' in memory store '{self._store}'")
        with self._lock:
            self._db.execute(
                "UPDATE skills SET approved = ?, rejected = ?, updated_at = ? WHERE store = ? AND id = ?",
                (int(approve), int(not approve), time.time(), self._store, skill_id),
            )
        decided = self.get(skill_id)
        assert decided is not None  # found above
        return decided

    def record_use(self, skill_ids: Sequence[str], *, succeeded: bool, run_id: str, task_id: str) -> None:
        """Task ``task_id`` of run ``run_id`` received these skills; its visible outcome updates
        their confidence. Each use is kept (``skill_uses``) so that :meth:`forget_uses` can take
        back the uses of an attempt that never finished."""
        with self._lock:
            for skill_id in skill_ids:
                inserted = self._db.execute(
                    "INSERT OR IGNORE INTO skill_uses (store, skill_id, run_id, task_id, succeeded) "
                    "VALUES (?, ?, ?, ?, ?)", (self._store, skill_id, run_id, task_id, int(succeeded)),
                ).rowcount
                if inserted:  # a task's use counts once
                    self._count(skill_id, used=1, succeeded=int(succeeded))

    def forget_uses(self, run_id: str, task_id: str) -> int:
        """Take back the uses task ``task_id`` of run ``run_id`` recorded; returns how many."""
        with self._lock:
            rows = self._db.execute(
                "SELECT skill_id, succeeded FROM skill_uses WHERE store = ? AND run_id = ? AND task_id = ?",
                (self._store, run_id, task_id),
            ).fetchall()
            for row in rows:
                self._count(row["skill_id"], used=-1, succeeded=-row["succeeded"])
            self._db.execute("DELETE FROM skill_uses WHERE store = ? AND run_id = ? AND task_id = ?",
                             (self._store, run_id, task_id))
        return len(rows)

    def _count(self, skill_id: str, *, used: int, succeeded: int) -> None:
        self._db.execute(
            "UPDATE skills SET times_used = times_used + ?, times_succeeded = times_succeeded + ?, "
            "confidence = (times_succeeded + ? + 1.0) / (times_used + ? + 2.0), updated_at = ? "
            "WHERE store = ? AND id = ?",
            (used, succeeded, succeeded, used, time.time(), self._store, skill_id),
        )

    def forget_promoted_from(self, entry_ids: Sequence[str]) -> int:
        """Delete the skills promoted from any of ``entry_ids`` (entries no longer stored), and
        their uses; returns how many."""
        gone = set(entry_ids)
        doomed = [s.id for s in self.list() if gone & set(s.source_entry_ids)]
        with self._lock:
            for skill_id in doomed:
                self._db.execute("DELETE FROM skills WHERE store = ? AND id = ?", (self._store, skill_id))
                self._db.execute("DELETE FROM skill_uses WHERE store = ? AND skill_id = ?",
                                 (self._store, skill_id))
        return len(doomed)

    def promote(
        self, entry: MemoryEntry, episodic: EpisodicStore, *, min_similar: int, max_distance: float,
        run_ids: Sequence[str] | None = None,
    ) -> Skill | None:
        """A new unapproved skill if ``entry`` is the ``min_similar``-th similar entry of its
        role and type across different tasks, and none of them already made a skill."""
        similar = [
            r.entry for r in episodic.recall(
                entry.content, role=entry.role, type=entry.type, k=max(min_similar * 3, 10),
                run_ids=run_ids, touch=False,
            )
            if r.distance <= max_distance
        ]
        by_task = {e.task_id: e for e in [entry, *similar]}
        if len(by_task) < min_similar:
            return None
        sources = {e.id for e in by_task.values()}
        if any(sources & set(s.source_entry_ids) for s in self.list(role=entry.role)):
            return None
        name = " ".join(entry.content.split()[:8])
        return self.add(Skill(
            name=name, description=entry.content, role=entry.role, category=entry.type,
            template=entry.content, source_task_ids=sorted(by_task), source_entry_ids=sorted(sources),
        ))
