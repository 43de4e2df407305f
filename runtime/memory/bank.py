"""One memory store opened under a data directory: episodic entries, skills and proposals.

This is the library API behind `critiquelab memory …` and what a run writes to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from critiquelab.core.errors import UserError
from critiquelab.runtime.memory.config import DEFAULT_COLLECTION, MemoryConfig
from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.episodic import EpisodicStore, Recalled
from critiquelab.runtime.memory.sharing import Proposal, Proposals
from critiquelab.runtime.memory.skills import Skill, SkillLibrary
from critiquelab.runtime.memory.sqlite_db import connect
from critiquelab.runtime.pool.embedder import Embedder


def memory_dir(home: Path) -> Path:
    """Where a data directory keeps its memory (apart from the pool's Chroma, which another
    process owns)."""
    return home / "memory"


@dataclass
class Written:
    """What writing one entry did."""

    entry: MemoryEntry
    proposals: list[Proposal] = field(default_factory=list)
    skill: Skill | None = None


class MemoryBank:
    """Episodic store, skills library and proposals of the memory store ``collection``."""

    def __init__(
        self, home: Path, *, collection: str = DEFAULT_COLLECTION, chroma_url: str | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        directory = memory_dir(home)
        self.collection = collection
        if chroma_url:
            self.episodic = EpisodicStore(url=chroma_url, collection=collection, embedder=embedder)
        else:
            self.episodic = EpisodicStore(directory / "chroma", collection=collection, embedder=embedder)
        try:
            self._db = connect(directory / "memory.sqlite")
        except BaseException:
            self.episodic.close()  # its lock too: the store is not left locked by a failed open
            raise
        self.skills = SkillLibrary(self._db, collection)
        self.proposals = Proposals(self._db, collection, self.episodic)

    def write(
        self, entry: MemoryEntry, config: MemoryConfig, *, run_ids: Sequence[str] | None = None
    ) -> Written:
        """Store ``entry`` (recallable by its own role), propose it to the roles that benefit,
        and promote its pattern to a skill when enough similar entries exist."""
        entry.audience = sorted(set(entry.audience) | {entry.role})
        self.episodic.add(entry)
        proposals = self.proposals.propose(entry, config.share_to, auto_approve=config.approval == "auto")
        skill = self.skills.promote(
            entry, self.episodic, min_similar=config.promote_after, max_distance=config.promote_distance,
            run_ids=run_ids,
        )
        return Written(entry, proposals, skill)

    def forget_attempt(self, run_id: str, task_id: str) -> int:
        """Undo what an unfinished attempt of run ``run_id`` at ``task_id`` wrote — its entries,
        their proposals, the skills promoted from them and the skill uses it recorded — so that
        solving the task again (a resumed run: the process was stopped after memory was written
        but before the task's checkpoint) leaves the store as one attempt would. Returns the
        entries deleted."""
        forgotten = self.episodic.forget_task(run_id, task_id)
        self.proposals.forget(forgotten)
        self.skills.forget_promoted_from(forgotten)
        self.skills.forget_uses(run_id, task_id)
        return len(forgotten)

    def search(self, text: str, *, k: int = 10, role: str | None = None, type: str | None = None,
               tags: Sequence[str] = ()) -> list[Recalled]:
        """Semantic search for a researcher: no retrieval is counted."""
        return self.episodic.recall(text, role=role, type=type, tags=tags, k=k, touch=False,
                                    include_deprecated=True)

    def decide(self, item_id: str, *, approve: bool) -> Proposal | Skill:
        """Approve or reject a proposal (``p-…``) or a skill (``s-…``)."""
        if item_id.startswith("p-"):
            return self.proposals.decide(item_id, approve=approve)
        if item_id.startswith("s-"):
            return self.skills.decide(item_id, approve=approve)
        raise UserError(f"'{item_id}' is neither a proposal id (p-…) nor a skill id (s-…)")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.close()
        self.episodic.close()

    def __enter__(self) -> MemoryBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
