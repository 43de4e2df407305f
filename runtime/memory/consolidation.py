"""Consolidation: near-duplicate entries merged, stale ones decayed.

Two active entries of the same role and type whose cosine distance is at most ``threshold``
say the same thing: the one recalled more (then the older) is kept, with the other's tags and
retrieval count added, and the other is marked deprecated with ``superseded_by``. An entry
neither created nor recalled within ``stale_days`` is decayed (deprecated, ``decayed: true``).
Deprecated entries stay in the store (a researcher can still search them) but are never
recalled into prompts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.episodic import EpisodicStore

DUPLICATE_DISTANCE = 0.1


@dataclass(frozen=True)
class ConsolidationReport:
    entries: int  # in the store, deprecated included
    active_before: int
    active_after: int
    merged: int
    decayed: int
    redundancy_before: float  # share of active entries that had a near-duplicate
    redundancy_after: float


def _duplicate_pairs(
    entries: list[MemoryEntry], vectors: dict[str, list[float]], threshold: float
) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of entries of one role and type within ``threshold``."""
    import numpy as np

    if len(entries) < 2:
        return []
    matrix = np.array([vectors[e.id] for e in entries], dtype=float)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    kinds = [(e.role, e.type) for e in entries]
    close = np.argwhere(np.triu(1.0 - unit @ unit.T <= threshold, k=1))
    return [(int(i), int(j)) for i, j in close if kinds[i] == kinds[j]]


def redundancy(
    store: EpisodicStore, threshold: float = DUPLICATE_DISTANCE, *, run_id: str | None = None
) -> tuple[int, float]:
    """Active entries (of ``run_id``, else all) and the share of them that have a near-duplicate."""
    active = [e for e in store.all(include_deprecated=False) if run_id is None or e.run_id == run_id]
    pairs = _duplicate_pairs(active, store.vectors([e.id for e in active]), threshold)
    redundant = {i for pair in pairs for i in pair}
    return len(active), (len(redundant) / len(active) if active else 0.0)


def consolidate(
    store: EpisodicStore, *, threshold: float = DUPLICATE_DISTANCE, stale_days: float | None = None,
    now: float | None = None,
) -> ConsolidationReport:
    """Merge near-duplicates and decay stale entries in ``store``."""
    now = time.time() if now is None else now
    entries = store.count()
    active = store.all(include_deprecated=False)
    vectors = store.vectors([e.id for e in active])
    pairs = _duplicate_pairs(active, vectors, threshold)
    redundancy_before = len({i for p in pairs for i in p}) / len(active) if active else 0.0
    merged_into: dict[int, int] = {}
    for i, j in pairs:
        i, j = merged_into.get(i, i), merged_into.get(j, j)
        if i == j or active[i].deprecated or active[j].deprecated:
            continue
        keep, drop = sorted((i, j), key=lambda n: (-active[n].retrieval_count, active[n].created_at))
        kept, dropped = active[keep], active[drop]
        kept.tags = sorted(set(kept.tags) | set(dropped.tags))
        kept.retrieval_count += dropped.retrieval_count
        kept.audience = sorted(set(kept.audience) | set(dropped.audience))
        kept.context = {**kept.context, "merged": sorted({*kept.context.get("merged", []), dropped.id})}
        dropped.deprecated = True
        dropped.context = {**dropped.context, "superseded_by": kept.id}
        merged_into[drop] = keep
        store.update(kept)
        store.update(dropped)
    decayed = 0
    if stale_days is not None:
        cutoff = now - stale_days * 86400
        for entry in active:
            if not entry.deprecated and max(entry.created_at, entry.last_retrieved) < cutoff:
                entry.deprecated = True
                entry.context = {**entry.context, "decayed": True}
                store.update(entry)
                decayed += 1
    active_after, redundancy_after = redundancy(store, threshold)
    return ConsolidationReport(entries, len(active), active_after, len(merged_into), decayed,
                               redundancy_before, redundancy_after)
