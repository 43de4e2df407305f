"""Metrics of knowledge sharing for one run: reuse, error reduction over the run's order,
recall quality on a probe set built from the run, memory size and redundancy."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from critiquelab.eval.results import ProblemResult
from critiquelab.pipelines.with_memory.outcome import MemoryFigures
from critiquelab.runtime.memory.consolidation import redundancy
from critiquelab.runtime.memory.demos import DEMO
from critiquelab.runtime.memory.episodic import EpisodicStore


def reuse(results: Sequence[ProblemResult]) -> dict[str, float]:
    """Share of memory-eligible role calls that received a memory written on another task or
    about another role (``reuse_rate``), and share whose output used an injected text
    (``used_rate``, see :func:`critiquelab.runtime.memory.injection.used_memory`)."""
    total = Counter[str]()
    for row in MemoryFigures.rows(results):
        for key in ("memory_role_calls", "memory_injected_calls", "memory_first_attempt_injected_calls",
                    "memory_demo_calls", "memory_foreign_calls", "memory_used_calls",
                    "memory_entries_written", "memory_skills_promoted"):
            total[key] += int(getattr(row.figures, key) or 0)
    calls = total["memory_role_calls"]
    return {
        "memory.role_calls": calls, "memory.injected_calls": total["memory_injected_calls"],
        # What recall on failure changes: how many first attempts still received anything.
        "memory.injected_first_attempts": total["memory_first_attempt_injected_calls"],
        "memory.demo_calls": total["memory_demo_calls"],
        "memory.entries_written": total["memory_entries_written"],
        "memory.skills_promoted": total["memory_skills_promoted"],
        **({"memory.reuse_rate": total["memory_foreign_calls"] / calls,
            "memory.used_rate": total["memory_used_calls"] / calls} if calls else {}),
    }


def error_blocks(results: Sequence[ProblemResult], block: int) -> list[dict[str, Any]]:
    """Failures per block of ``block`` problems in run order, with their reasons."""
    rows = []
    for start in range(0, len(results), block):
        chunk = results[start:start + block]
        failed = [r for r in chunk if not r.passed]
        rows.append({"block": start // block, "problems": len(chunk), "failed": len(failed),
                     "fail_rate": len(failed) / len(chunk),
                     "reasons": dict(Counter(r.reason or r.status for r in failed))})
    return rows


def tie_fair_top_k(ranked: Sequence[tuple[float, bool]], k: int) -> tuple[float, float]:
    """Relevant results expected in the top ``k`` of ``ranked`` ((distance, relevant) pairs, best
    first) and the probability that one is there, with entries at equal distance in random order:
    the metric then does not depend on how a store happens to break ties."""
    if len(ranked) <= k:
        found = sum(relevant for _, relevant in ranked)
        return float(found), float(found > 0)
    boundary = round(ranked[k - 1][0], 9)
    closer = [relevant for distance, relevant in ranked if round(distance, 9) < boundary]
    tied = [relevant for distance, relevant in ranked if round(distance, 9) == boundary]
    slots, tied_relevant = k - len(closer), sum(tied)
    expected = sum(closer) + slots * tied_relevant / len(tied)
    miss = 0.0 if any(closer) else math.comb(len(tied) - tied_relevant, slots) / math.comb(len(tied), slots)
    return expected, 1.0 - miss


def recall_quality(store: EpisodicStore, run_id: str, k: int) -> dict[str, float]:
    """Precision@K and hit@K on probes built from the run: for each task it wrote entries on,
    the query is the task's summary and the relevant entries are those of that task (precision
    is relevant results in the top K over min(K, relevant entries))."""
    # Lessons only: a demo is recalled prompt to prompt, by its own rule (critiquelab.runtime.memory.demos).
    entries = [e for e in store.all(include_deprecated=False) if e.run_id == run_id and e.type != DEMO]
    by_task: dict[str, set[str]] = {}
    queries: dict[str, str] = {}
    for entry in entries:
        by_task.setdefault(entry.task_id, set()).add(entry.id)
        queries.setdefault(entry.task_id, str(entry.context.get("task_summary") or ""))
    probes = [(task, query) for task, query in queries.items() if query]
    if not probes:
        return {}
    precision = hits = 0.0
    for task, query in probes:
        # Every entry of the run, ranked: at the K-th place several entries may lie at one distance
        # (the same lesson written on two tasks), and the store orders such ties arbitrarily.
        ranked = [(r.distance, r.entry.id in by_task[task])
                  for r in store.recall(query, k=len(entries), run_ids=[run_id], touch=False,
                                        exclude_types=(DEMO,))]
        relevant, hit = tie_fair_top_k(ranked, k)
        precision += relevant / min(k, len(by_task[task]))
        hits += hit
    return {
        "memory.recall_precision_at_k": precision / len(probes),
        "memory.recall_hit_at_k": hits / len(probes), "memory.recall_probes": len(probes),
    }


def size(store: EpisodicStore, run_id: str) -> dict[str, float]:
    """The store's size, and the run's active entries with the share that have a near-duplicate."""
    active, ratio = redundancy(store, run_id=run_id)
    return {"memory.store_entries": store.count(), "memory.entries": active, "memory.redundancy": ratio}
