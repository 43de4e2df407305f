"""ChromaPoolStore behind a MessagePool: background writes, reopening, filters, search, exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.chroma_server import chroma_server, free_port
from support.pool import HashEmbedder, make_message

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.chroma_process import ChromaProcessStore
from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
from critiquelab.runtime.pool.message_pool import MessagePool, seq_of

REPO = Path(__file__).resolve().parents[3]


def test_publish_returns_at_once_while_the_writer_embeds_in_the_background(tmp_path: Path) -> None:
    slow = HashEmbedder(delay=0.3)
    store = ChromaPoolStore(tmp_path, embedder=slow)
    with MessagePool(store) as pool:
        start = time.monotonic()
        for i in range(20):
            pool.publish(make_message(summary=f"m{i}"))
        publishing = time.monotonic() - start
        assert publishing < 0.25  # 20 publishes cost less than one embedding call
        assert store.pending > 0
        assert len(pool.history()) == 20  # readable before persisted
        pool.flush()
        assert store.pending == 0 and store.count() == 20
    assert slow.threads and threading.current_thread().name not in slow.threads  # embedded off the hot path
    assert slow.calls < 20  # the backlog was written in batches


def test_reopening_the_directory_sees_earlier_messages_in_order(
    tmp_path: Path, hash_embedder: HashEmbedder
) -> None:
    with MessagePool(ChromaPoolStore(tmp_path, embedder=hash_embedder)) as first:
        sent = [
            first.publish(
                make_message(task_id="A", summary="assign", intent="task_assignment", created_at=5.0)
            ),
            first.publish(
                make_message(
                    task_id="A",
                    summary="code\n\nv1",
                    content="def f():\n    pass\n",
                    intent="output.complete",
                    recipient="critic",
                    in_reply_to="x",
                    metadata={"usage": {"tokens": 7}},
                    created_at=5.0,
                )
            ),
            first.publish(make_message(task_id="B", summary="other task")),
        ]
    second_store = ChromaPoolStore(tmp_path, embedder=hash_embedder)
    with MessagePool(second_store) as second:
        assert second.history(task_id="A") == sent[:2]  # every field survives, order by seq
        later = second.publish(make_message(task_id="A", summary="critique", created_at=1.0))
        assert seq_of(later) > seq_of(sent[-1])  # later sessions sort after earlier ones
        assert [m.summary for m in second.history(task_id="A")] == ["assign", "code\n\nv1", "critique"]
        assert [m.summary for m in second.history()] == ["assign", "code\n\nv1", "other task", "critique"]


def test_query_filters_and_time_range_are_pushed_to_chroma(
    tmp_path: Path, hash_embedder: HashEmbedder
) -> None:
    with MessagePool(ChromaPoolStore(tmp_path, embedder=hash_embedder)) as pool:
        pool.publish(
            make_message(intent="critique", sender="critic", created_at=10.0, summary="c1", run_id="r1")
        )
        pool.publish(
            make_message(intent="fix", recipient="critic", created_at=20.0, summary="f1", run_id="r1")
        )
        pool.publish(
            make_message(intent="critique", sender="critic", created_at=30.0, summary="c2", run_id="r2")
        )
    store = ChromaPoolStore(tmp_path, embedder=hash_embedder)
    with MessagePool(store) as reopened:  # nothing in memory: every result comes from Chroma

        def summaries(**kwargs: object) -> list[str]:
            return [m.summary for m in reopened.query(**kwargs)]  # type: ignore[arg-type]

        assert summaries(where={"intent": "critique"}) == ["c1", "c2"]
        assert summaries(where={"recipient": "critic"}) == ["f1"]
        assert summaries(where={"recipient": None}) == ["c1", "c2"]
        assert summaries(where={"run_id": "r1", "sender": "critic"}) == ["c1"]
        assert summaries(since=20.0) == ["f1", "c2"]
        assert summaries(since=10.0, until=30.0) == ["c1", "f1"]
        assert summaries(limit=1) == ["c1"]
        assert [m.summary for m in store.get({"run_id": "r2"})] == ["c2"]
        with pytest.raises(UserError):
            store.get({"colour": "red"})


def test_concurrent_publishers_persist_everything_exactly_once(
    tmp_path: Path, hash_embedder: HashEmbedder
) -> None:
    store = ChromaPoolStore(tmp_path, embedder=hash_embedder)
    with MessagePool(store) as pool:

        def publish_many(worker: int) -> None:
            for i in range(200):
                pool.publish(make_message(sender=f"w{worker}", task_id=f"T{worker}", summary=f"{worker}:{i}"))

        with ThreadPoolExecutor(8) as executor:
            list(executor.map(publish_many, range(8)))
        pool.flush()
        persisted = store.get()
        assert store.count() == 1600
        assert len({m.id for m in persisted}) == 1600
        assert [m.id for m in persisted] == [m.id for m in pool.history()]
        for worker in (0, 7):
            assert [m.summary for m in store.get({"task_id": f"T{worker}"})] == [
                f"{worker}:{i}" for i in range(200)
            ]


def test_semantic_search_ranks_the_relevant_message_first(tmp_path: Path, minilm: object) -> None:
    topics = {
        "sort": (
            "Sorting a list",
            "def sort_items(xs):\n    return sorted(xs)  # ascending order of the list",
        ),
        "dates": (
            "Parsing dates",
            "def parse(s):\n    return datetime.strptime(s, '%Y-%m-%d')  # date strings",
        ),
        "prime": ("Prime numbers", "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))"),
    }
    with MessagePool(ChromaPoolStore(tmp_path, embedder=minilm)) as pool:  # type: ignore[arg-type]
        for key, (summary, content) in topics.items():
            pool.publish(make_message(task_id=key, summary=summary, content=content))
        results = pool.search("is this number prime", k=3)  # no flush: search flushes itself
        assert results[0].task_id == "prime"
        assert len(results) == 3
        assert pool.search("chronological ordering of list elements", k=1)[0].task_id == "sort"
        assert [m.task_id for m in pool.search("is this number prime", where={"task_id": "dates"})] == [
            "dates"
        ]


def test_writer_failures_surface_on_flush(tmp_path: Path) -> None:
    broken = HashEmbedder(fail=True)
    store = ChromaPoolStore(tmp_path, embedder=broken)
    pool = MessagePool(store)
    pool.publish(make_message())
    with pytest.raises(RuntimeError, match="1 messages could not be persisted: embedder exploded"):
        pool.flush(timeout=10)
    pool.flush()  # reported once
    broken.fail = False
    pool.publish(make_message())
    pool.close()
    assert MessagePool(ChromaPoolStore(tmp_path, embedder=broken)).query() != []


def test_closed_store_refuses_messages(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    store = ChromaPoolStore(tmp_path, embedder=hash_embedder)
    store.close()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.add(make_message())


def test_pending_messages_are_written_on_a_normal_exit_without_close(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from support.pool import HashEmbedder, make_message
        from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
        from critiquelab.runtime.pool.message_pool import MessagePool

        pool = MessagePool(ChromaPoolStore({str(tmp_path)!r}, embedder=HashEmbedder(delay=0.05)))
        for i in range(30):
            pool.publish(make_message(summary=str(i)))
        print("pending at exit:", pool.store.pending)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split(":")[1]) > 0  # the test is meaningful: work was still queued
    store = ChromaPoolStore(tmp_path, embedder=HashEmbedder())
    assert store.count() == 30
    store.close()


def test_unusable_directory_is_a_user_error_at_once(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(UserError, match="cannot create the message store directory"):
        ChromaPoolStore(blocker / "chroma")


def test_a_store_that_cannot_open_is_a_user_error_at_once(tmp_path: Path) -> None:
    (tmp_path / "chroma.sqlite3").write_bytes(b"this is not a sqlite database" * 100)
    with pytest.raises(UserError, match="cannot open the message store"):
        ChromaPoolStore(tmp_path, embedder=HashEmbedder())


def test_bad_server_url_and_ambiguous_arguments_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not both"):
        ChromaPoolStore(tmp_path, url="http://localhost:1")
    with pytest.raises(UserError, match="cannot reach the Chroma server"):
        ChromaPoolStore(url=f"http://127.0.0.1:{free_port()}")


def test_http_client_against_a_local_chroma_server(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    with chroma_server(tmp_path / "srv") as url:
        with MessagePool(ChromaPoolStore(url=url, embedder=hash_embedder)) as pool:
            pool.publish(make_message(summary="over http", recipient="critic"))
        with MessagePool(ChromaPoolStore(url=url, embedder=hash_embedder)) as again:
            assert [m.summary for m in again.query(where={"recipient": "critic"})] == ["over http"]
        # The runner's store: the same client, in a child process.
        with MessagePool(ChromaProcessStore(url=url, embedder=hash_embedder)) as child:
            child.publish(make_message(summary="via the child", recipient="critic"))
            child.flush()
            assert [m.summary for m in child.query(where={"recipient": "critic"})] == [
                "over http", "via the child",
            ]


class _SizedSlowEmbedder(HashEmbedder):
    dimension = 8  # lets the store write placeholders without calling the (slow) model


def test_close_does_not_wait_for_embeddings_and_search_catches_up(tmp_path: Path) -> None:
    slow = _SizedSlowEmbedder(delay=3.0)
    topics = ["sorting a list of numbers", "parsing dates from strings", "checking if a number is prime"]
    pool = MessagePool(ChromaPoolStore(tmp_path, embedder=slow))
    for i in range(24):
        pool.publish(make_message(summary=topics[i % 3], content=f"variant {i}"))
    pool.flush()
    deadline = time.monotonic() + 10
    while slow.calls == 0 and time.monotonic() < deadline:  # the pool is quiet: indexing starts
        time.sleep(0.05)
    assert slow.calls == 1 and slow.threads == {"pool-indexer-critiquelab_messages"}
    start = time.monotonic()
    pool.close()
    assert time.monotonic() - start < 1.0  # not the 3 s embedding in progress
    fast = _SizedSlowEmbedder()
    with MessagePool(ChromaPoolStore(tmp_path, embedder=fast)) as reopened:
        assert len(reopened.history()) == 24  # durable without embeddings
        # The hash embedder matches exact documents only: the nearest record to a document's own
        # text is that record, which holds only if the unindexed records were embedded first
        # (with placeholder vectors every record would tie).
        for i in (2, 13, 23):
            [hit] = reopened.search(f"{topics[i % 3]}\n\nvariant {i}", k=1)
            assert hit.content == f"variant {i}"
