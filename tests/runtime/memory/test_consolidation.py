"""Consolidation: near-duplicates merged into one, stale entries decayed, redundancy measured."""

import time

from critiquelab.runtime.memory.consolidation import consolidate, redundancy
from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.episodic import EpisodicStore


def test_duplicates_merge_and_stale_entries_decay(tmp_path, minilm):
    store = EpisodicStore(tmp_path / "chroma", collection="mem", embedder=minilm)
    old = time.time() - 40 * 86400

    def add(content, **fields):
        return store.add(MemoryEntry(role="coder", type="reflection", task_id=fields.pop("task", "T/1"),
                                     content=content, **fields))

    kept = add("Handle the empty list before indexing it.", tags=["list"], retrieval_count=3)
    dropped = add("Handle the empty list before indexing it!", tags=["edge"], task="T/2")
    other_role = store.add(MemoryEntry(role="critic", type="reflection", task_id="T/3",
                                       content="Handle the empty list before indexing it."))
    stale = add("Prefer str.join over repeated concatenation.", created_at=old, task="T/4")
    fresh = add("Use integer division for counts.", task="T/5")
    assert redundancy(store)[1] == 2 / 5

    report = consolidate(store, stale_days=30)
    assert (report.merged, report.decayed, report.active_before, report.active_after) == (1, 1, 5, 3)
    assert report.redundancy_before == 2 / 5 and report.redundancy_after == 0.0
    merged = store.get(kept.id)
    assert merged.tags == ["edge", "list"] and merged.retrieval_count == 3 and not merged.deprecated
    gone = store.get(dropped.id)
    assert gone.deprecated and gone.context["superseded_by"] == kept.id
    assert store.get(stale.id).deprecated and store.get(stale.id).context["decayed"]
    assert not store.get(fresh.id).deprecated and not store.get(other_role.id).deprecated
    assert store.recall("empty list indexing", role="coder", k=5)[0].entry.id == kept.id
    assert dropped.id not in [r.entry.id for r in store.recall("empty list indexing", k=5)]
