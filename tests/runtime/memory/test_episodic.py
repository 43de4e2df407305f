"""Episodic store: recall by similarity with filters, retrieval counts, forget, and entries that
survive across processes."""

import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from support.chroma_server import chroma_server

from critiquelab.core.errors import UserError
from critiquelab.runtime.memory.entries import MemoryEntry, task_tags
from critiquelab.runtime.memory.episodic import (
    EpisodicStore,
    served_task_ids,
    stored_collections,
    stored_task_ids,
)


def entry(content, **fields):
    defaults = {"role": "coder", "type": "reflection", "task_id": "HumanEval/0", "run_id": "r1"}
    return MemoryEntry(content=content, **{**defaults, **fields})


@pytest.fixture
def store(tmp_path, minilm):
    return EpisodicStore(tmp_path / "chroma", collection="mem", embedder=minilm)


def test_recall_is_by_similarity_and_counts_retrievals(store):
    off_by_one = store.add(entry("Check loop bounds: range(n) stops before n, an off-by-one error."))
    store.add(entry("Strip whitespace before comparing strings.", task_id="HumanEval/1"))
    store.add(entry("Sort the list before taking the median.", task_id="HumanEval/2"))
    [best, *_] = store.recall("my loop misses the last index", k=3)
    assert best.entry.id == off_by_one.id and best.distance < 0.8
    again = store.get(off_by_one.id)
    assert again.retrieval_count == 1 and again.last_retrieved > 0
    store.recall("my loop misses the last index", k=1, touch=False)
    assert store.get(off_by_one.id).retrieval_count == 1


def test_filters_role_type_tags_audience_runs_and_deprecated(store):
    store.add(entry("A coder lesson about strings", tags=["string"], audience=["coder"]))
    store.add(entry("A critic finding about strings", role="critic", type="review_feedback", tags=["string"],
                    audience=["critic", "fixer"]))
    store.add(entry("A coder lesson about lists", tags=["list"], run_id="r2", audience=["coder"]))
    store.add(entry("An old coder lesson about strings", tags=["string"], deprecated=True,
                    audience=["coder"]))

    def contents(**filters):
        return sorted(r.entry.content for r in store.recall("strings", k=10, touch=False, **filters))

    assert contents(role="critic") == ["A critic finding about strings"]
    assert contents(type="reflection") == ["A coder lesson about lists", "A coder lesson about strings"]
    assert contents(tags=["string"]) == ["A coder lesson about strings", "A critic finding about strings"]
    assert contents(audience="fixer") == ["A critic finding about strings"]
    assert contents(run_ids=["r2"]) == ["A coder lesson about lists"]
    assert "An old coder lesson about strings" in contents(include_deprecated=True)
    with pytest.raises(UserError, match="memory type 'lesson' is unknown"):
        store.recall("x", type="lesson")


def test_forget_before_deletes_only_older_entries(store):
    old = store.add(entry("old lesson", created_at=time.time() - 86400))
    new = store.add(entry("new lesson"))
    assert store.forget_before(time.time() - 3600) == 1
    assert store.get(old.id) is None and store.get(new.id) is not None


def test_entries_survive_across_processes(tmp_path, minilm):
    """One process writes, another (a fresh interpreter) recalls and writes back; the first reads it.
    One at a time: a local store is open in one process at once (runtime/pool/store_lock.py)."""
    path = tmp_path / "chroma"
    with_ids = EpisodicStore(path, collection="mem", embedder=minilm)
    written = with_ids.add(entry("Return early when the input list is empty.", tags=["list"]))
    with_ids.close()
    child = textwrap.dedent(f"""
        from critiquelab.runtime.memory.episodic import EpisodicStore
        from critiquelab.runtime.memory.entries import MemoryEntry
        store = EpisodicStore({str(path)!r}, collection="mem")
        [hit] = store.recall("empty list input", k=1)
        print(hit.entry.id, hit.entry.tags)
        store.add(MemoryEntry(id="m-from-child", role="critic", type="review_feedback",
                              task_id="HumanEval/9", content="Reviewers found: missing edge case"))
    """)
    # A fresh interpreter imports Chroma and loads the embedder: ~10 s alone, over 240 s once
    # beside a model run on 2 cores.
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=600,
                         check=True)
    assert out.stdout.split()[0] == written.id
    reopened = EpisodicStore(path, collection="mem", embedder=minilm)
    assert reopened.get(written.id).retrieval_count == 1  # the other process's recall was counted
    assert reopened.get("m-from-child").role == "critic"


def test_task_tags_come_from_the_prompt():
    prompt = 'def f(s: str):\n    """Return the vowels of the string, sorted."""'
    assert task_tags(prompt) == ["sorting", "string"]


def _files(directory):
    return {p: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_stored_collections_counts_entries_and_writes_nothing(tmp_path, minilm):
    """The listing reads Chroma's SQLite file read-only: a client open would write to it (Chroma's
    sysdb records each open), and a refused memory command must leave the store as it was."""
    path = tmp_path / "chroma"
    full = EpisodicStore(path, collection="mem", embedder=minilm)
    full.add(entry("one lesson"))
    full.add(entry("another lesson", task_id="HumanEval/3"))
    empty = EpisodicStore(path, collection="empty", embedder=minilm)
    full.close()
    empty.close()  # the last user closes the shared client and lets the lock go
    before = _files(path)
    assert stored_collections(path) == {"mem": 2, "empty": 0}
    assert stored_collections(tmp_path / "absent") == {}
    assert _files(path) == before


def test_the_tasks_a_run_learned_on_are_read_without_writing(tmp_path, minilm):
    """A warm start is checked against them before anything opens the store: a refused run must
    leave it as it was (locally: not a byte; on a server: no store created)."""
    path = tmp_path / "chroma"
    store = EpisodicStore(path, collection="mem", embedder=minilm)
    store.add(entry("one lesson"))
    store.add(entry("again", task_id="HumanEval/3"))
    store.add(entry("another run's", task_id="HumanEval/4", run_id="r2"))
    store.close()
    before = _files(path)
    assert stored_task_ids(path, "mem", "r1") == {"HumanEval/0", "HumanEval/3"}
    assert stored_task_ids(path, "other", "r1") == set()
    assert stored_task_ids(tmp_path / "absent", "mem", "r1") == set()
    assert _files(path) == before
    with chroma_server(tmp_path / "served") as url:
        served = EpisodicStore(url=url, collection="mem", embedder=minilm)
        served.add(entry("one lesson"))
        served.close()
        assert served_task_ids(url, "mem", "r1") == {"HumanEval/0"}
        assert served_task_ids(url, "other", "r1") == set()
        assert served_task_ids(url, "mem", "r2") == set()
        assert stored_collections(tmp_path / "served") == {"mem": 1}  # "other" was not created


def test_a_foreign_database_with_chromas_table_names_is_refused_and_left_as_it_was(tmp_path):
    """Tables named as the listing reads them are not a Chroma store: opening it, Chroma would
    migrate the file before failing."""
    path = tmp_path / "chroma"
    path.mkdir()
    with sqlite3.connect(path / "chroma.sqlite3") as db:
        db.execute("CREATE TABLE collections (id TEXT, name TEXT)")
        db.execute("CREATE TABLE segments (id TEXT, collection TEXT, scope TEXT)")
        db.execute("CREATE TABLE embeddings (id INTEGER, segment_id TEXT)")
        db.execute("INSERT INTO collections VALUES ('c', 'critiquelab_memory')")
    before = _files(path)

    with pytest.raises(UserError, match="is not a Chroma store"):
        stored_collections(path)
    assert _files(path) == before
