"""Consolidation: near-duplicate entries merged, stale ones decayed.

Two active entries of the same role and type whose cosine distance is at most ``threshold``
say the same thing: the one recalled more (then the older) is kept, with the other's tags and
retrieval count added, and the other is marked deprecated with ``superseded_by``. An entry
neither created nor recalled within ``stale_days`` is decayed (deprecated, ``decayed: true``).
Deprecated entries stay in the store (a researcher can still search them) but are never
recalled into prompts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.memory.entries import MemoryEntry
from pipelines.memory.episodic import EpisodicStore

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


def _distance(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norm if norm else 1.0


def _duplicate_pairs(
    entries: list[MemoryEntry], vectors: dict[str, list[float]], threshold: float
) -> list[tuple[int, int]]:
    pairs = []
    for i, a in enumerate(entries):
        for j in range(i + 1, len(entries)):
            b = entries[j]
            if (a.role, a.type) == (b.role, b.type) and _distance(vectors[a.id], vectors[b.id]) <= threshold:
                pairs.append((i, j))
    return pairs


def redundancy(store: EpisodicStore, threshold: float = DUPLICATE_DISTANCE) -> tuple[int, float]:
    """Active entries and the share of them that have a near-duplicate."""
    active = store.all(include_deprecated=False)
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
