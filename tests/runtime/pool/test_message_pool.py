"""MessagePool in memory: ordering, subscriptions, queues, queries, context, store merging."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.pool import make_message

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.context import bind_pool, current_pool, using_pool
from critiquelab.runtime.pool.message_pool import MessagePool, seq_of
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.pool.store import PoolStore, from_record, matches, sort_messages, to_record


def test_order_is_total_within_a_task_even_when_timestamps_tie() -> None:
    pool = MessagePool()
    sent = [pool.publish(make_message(created_at=1000.0, summary=f"m{i}")) for i in range(50)]
    seqs = [seq_of(m) for m in sent]
    assert seqs == sorted(seqs) and len(set(seqs)) == 50
    assert [m.summary for m in pool.history(task_id="HumanEval/0")] == [f"m{i}" for i in range(50)]


def test_history_follows_publish_order_not_creation_time() -> None:
    pool = MessagePool()
    late, early = make_message(created_at=2.0, summary="late"), make_message(created_at=1.0, summary="early")
    pool.publish(late)
    pool.publish(early)
    assert [m.summary for m in pool.history()] == ["late", "early"]


def test_publish_returns_a_stamped_copy_and_leaves_the_callers_message_alone() -> None:
    pool = MessagePool()
    original = make_message(metadata={"usage": {"tokens": 3}})
    stamped = pool.publish(original)
    assert "seq" not in original.metadata
    assert stamped.metadata["seq"] == seq_of(stamped)
    assert stamped.metadata["usage"] == {"tokens": 3}
    assert stamped.id == original.id


def test_history_filters_by_task_thread_and_run() -> None:
    pool = MessagePool()
    pool.publish(make_message(task_id="A", thread_id="x", run_id="r1", summary="a-x"))
    pool.publish(make_message(task_id="B", thread_id="y", run_id="r1", summary="b-y"))
    pool.publish(make_message(task_id="A", thread_id="z", run_id="r2", summary="a-z"))
    assert [m.summary for m in pool.history(task_id="A")] == ["a-x", "a-z"]
    assert [m.summary for m in pool.history(thread_id="y")] == ["b-y"]
    assert [m.summary for m in pool.history(run_id="r1")] == ["a-x", "b-y"]
    assert [m.summary for m in pool.history(task_id="A", run_id="r1")] == ["a-x"]


# --- subscriptions ---------------------------------------------------------------------------


def test_intent_filter_and_no_self_delivery() -> None:
    pool = MessagePool()
    pool.subscribe("critic", intents=[Intent.OUTPUT_COMPLETE])
    pool.subscribe("coder", intents=[Intent.CRITIQUE, Intent.OUTPUT_COMPLETE])
    pool.publish(make_message(sender="coder", intent=Intent.OUTPUT_COMPLETE, summary="code"))
    pool.publish(make_message(sender="critic", intent=Intent.CRITIQUE, summary="review"))
    pool.publish(make_message(sender="critic", intent=Intent.STATUS, summary="status"))
    assert [m.summary for m in pool.take("critic")] == ["code"]
    assert [m.summary for m in pool.take("coder")] == ["review"]  # not its own code, not status


def test_a_single_intent_string_is_one_intent_not_characters() -> None:
    pool = MessagePool()
    pool.subscribe("critic", intents="critique")
    pool.publish(make_message(intent="fix"))
    pool.publish(make_message(intent="critique"))
    assert [m.intent for m in pool.take("critic")] == ["critique"]


def test_task_and_thread_filters() -> None:
    pool = MessagePool()
    pool.subscribe("a", task_id="T1")
    pool.subscribe("b", thread_id="th2")
    pool.publish(make_message(task_id="T1", thread_id="th1", summary="1"))
    pool.publish(make_message(task_id="T2", thread_id="th2", summary="2"))
    assert [m.summary for m in pool.take("a")] == ["1"]
    assert [m.summary for m in pool.take("b")] == ["2"]


def test_recipients_broadcasts_and_to_me_only() -> None:
    pool = MessagePool()
    pool.subscribe("critic")
    pool.subscribe("judge")
    pool.subscribe("fixer", to_me_only=True)
    pool.publish(make_message(summary="broadcast"))
    pool.publish(make_message(recipient="critic", summary="for critic"))
    pool.publish(make_message(recipient="fixer", summary="for fixer"))
    assert [m.summary for m in pool.take("critic")] == ["broadcast", "for critic"]
    assert [m.summary for m in pool.take("judge")] == ["broadcast"]  # never someone else's mail
    assert [m.summary for m in pool.take("fixer")] == ["for fixer"]  # no broadcasts


def test_overlapping_subscriptions_deliver_once() -> None:
    pool = MessagePool()
    pool.subscribe("critic", intents=["critique"])
    pool.subscribe("critic", task_id="HumanEval/0")
    pool.publish(make_message(intent="critique"))
    assert pool.pending("critic") == 1
    pool.unsubscribe("critic")
    pool.publish(make_message(intent="critique"))
    assert pool.pending("critic") == 1


def test_messages_before_subscribing_are_only_in_history() -> None:
    pool = MessagePool()
    pool.publish(make_message(summary="early"))
    pool.subscribe("critic")
    pool.publish(make_message(summary="late"))
    assert [m.summary for m in pool.take("critic")] == ["late"]
    assert len(pool.history()) == 2


# --- queues ----------------------------------------------------------------------------------


def test_take_batches_in_publish_order_with_max_items() -> None:
    pool = MessagePool()
    pool.subscribe("critic")
    for i in range(7):
        pool.publish(make_message(summary=str(i)))
    assert pool.pending("critic") == 7
    batches = [[m.summary for m in pool.take("critic", max_items=3)] for _ in range(4)]
    assert batches == [["0", "1", "2"], ["3", "4", "5"], ["6"], []]
    assert pool.pending("critic") == 0
    with pytest.raises(ValueError):
        pool.take("critic", max_items=0)


def test_take_blocks_until_a_message_arrives() -> None:
    pool = MessagePool()
    pool.subscribe("critic")
    timer = threading.Timer(0.2, lambda: pool.publish(make_message(summary="late")))
    start = time.monotonic()
    timer.start()
    got = pool.take("critic", timeout=5.0)
    waited = time.monotonic() - start
    assert [m.summary for m in got] == ["late"]
    assert 0.15 < waited < 2.0


def test_take_times_out_empty() -> None:
    pool = MessagePool()
    pool.subscribe("critic")
    start = time.monotonic()
    assert pool.take("critic", timeout=0.2) == []
    assert time.monotonic() - start >= 0.19
    assert pool.take("nobody") == [] and pool.pending("nobody") == 0


def test_take_async_wakes_on_a_publish_from_another_thread() -> None:
    pool = MessagePool()
    pool.subscribe("critic")

    async def scenario() -> tuple[list[Message], list[Message], float]:
        threading.Timer(0.2, lambda: pool.publish(make_message(summary="hi"))).start()
        start = time.monotonic()
        got = await asyncio.wait_for(pool.take_async("critic"), 5.0)
        waited = time.monotonic() - start
        empty = await pool.take_async("critic", timeout=0.1)
        return got, empty, waited

    got, empty, waited = asyncio.run(scenario())
    assert [m.summary for m in got] == ["hi"] and empty == []
    assert waited < 2.0


def test_concurrent_publishers_lose_and_duplicate_nothing() -> None:
    pool = MessagePool()
    pool.subscribe("observer")

    def publish_many(worker: int) -> None:
        for i in range(200):
            pool.publish(make_message(sender=f"w{worker}", task_id=f"T{worker}", summary=f"{worker}:{i}"))

    with ThreadPoolExecutor(8) as executor:
        list(executor.map(publish_many, range(8)))
    history = pool.history()
    assert len(history) == 1600 and len({m.id for m in history}) == 1600
    assert len({seq_of(m) for m in history}) == 1600
    for worker in range(8):  # each publisher's own order is preserved
        mine = [m.summary for m in pool.history(task_id=f"T{worker}")]
        assert mine == [f"{worker}:{i}" for i in range(200)]
    delivered = pool.take("observer")
    assert [m.id for m in delivered] == [m.id for m in history]


# --- queries ---------------------------------------------------------------------------------


def test_query_equality_filters_time_range_and_limit() -> None:
    pool = MessagePool()
    pool.publish(make_message(intent="critique", sender="critic", created_at=10.0, summary="c1"))
    pool.publish(
        make_message(intent="fix", sender="coder", recipient="critic", created_at=20.0, summary="f1")
    )
    pool.publish(make_message(intent="critique", sender="critic", created_at=30.0, summary="c2"))
    pool.publish(make_message(intent="critique", sender="critic", run_id="r9", created_at=40.0, summary="c3"))

    def summaries(**kwargs: Any) -> list[str]:
        return [m.summary for m in pool.query(**kwargs)]

    assert summaries(where={"intent": "critique"}) == ["c1", "c2", "c3"]
    assert summaries(where={"recipient": "critic"}) == ["f1"]
    assert summaries(where={"recipient": None, "sender": "critic"}) == ["c1", "c2", "c3"]
    assert summaries(where={"run_id": "r9"}) == ["c3"]
    assert summaries(since=20.0, until=40.0) == ["f1", "c2"]  # [since, until)
    assert summaries(where={"intent": "critique"}, limit=2) == ["c1", "c2"]
    with pytest.raises(UserError, match="cannot filter on colour"):
        pool.query({"colour": "red"})


def test_search_without_a_searchable_store_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="semantic search needs a store"):
        MessagePool().search("anything")


def test_closed_pool_refuses_publishes_and_context_manager_closes() -> None:
    with MessagePool() as pool:
        pool.publish(make_message())
    with pytest.raises(RuntimeError, match="closed"):
        pool.publish(make_message())
    pool.close()  # idempotent
    assert len(pool.history()) == 1


# --- store contract, with a fake store ---------------------------------------------------------


class ListStore:
    """A PoolStore over a list: earlier sessions' messages plus whatever this session adds."""

    searchable = False

    def __init__(self, earlier: list[Message]):
        self.records = [to_record(m) for m in earlier]
        self.flushed = self.closed = self.reads = 0

    def add(self, message: Message) -> None:
        self.records.append(to_record(message))

    def get(self, where: Any = None, *, since: float | None = None, until: float | None = None) -> list:
        self.reads += 1
        messages = [from_record(*r) for r in self.records]
        return sort_messages(m for m in messages if matches(m, where or {}, since, until))

    def search(self, text: str, *, where: Any = None, k: int = 5) -> list[Message]:
        raise AssertionError("not searchable")

    def flush(self, timeout: float | None = None) -> None:
        self.flushed += 1

    def close(self) -> None:
        self.closed += 1


def test_reads_merge_earlier_sessions_from_the_store_without_duplicates() -> None:
    earlier_pool = MessagePool()
    earlier = [earlier_pool.publish(make_message(summary=f"old{i}")) for i in range(3)]
    store = ListStore(earlier)
    assert isinstance(store, PoolStore)
    pool = MessagePool(store)
    pool.publish(make_message(summary="new"))
    assert [m.summary for m in pool.history()] == ["old0", "old1", "old2", "new"]
    assert [m.summary for m in pool.query(limit=1)] == ["old0"]
    pool.close()
    pool.close()
    assert store.closed == 1 and store.flushed == 0


def test_a_thread_minted_by_the_pool_is_read_from_memory_other_threads_from_the_store() -> None:
    earlier_pool = MessagePool()
    old = earlier_pool.publish(make_message(thread_id="resumed", summary="old"))
    store = ListStore([old])
    pool = MessagePool(store)
    fresh = pool.new_thread_id()
    assert fresh != pool.new_thread_id()
    pool.publish(make_message(thread_id=fresh, summary="new"))
    pool.publish(make_message(thread_id="resumed", summary="continued"))
    assert [m.summary for m in pool.history(thread_id=fresh)] == ["new"]
    assert store.reads == 0  # no earlier session can have written to a thread minted now
    assert [m.summary for m in pool.history(thread_id="resumed")] == ["old", "continued"]
    assert store.reads == 1


def test_record_round_trip_keeps_every_field() -> None:
    original = MessagePool().publish(
        make_message(
            summary="two\n\nparagraphs", content="def f():\n\n    return 1", recipient=None,
            in_reply_to="abc", metadata={"usage": {"prompt_tokens": 5}, "ok": True}, run_id="r",
        )
    )
    record_id, document, record = to_record(original)
    assert all(isinstance(v, str | int | float | bool) for v in record.values())
    assert document == "two\n\nparagraphs\n\ndef f():\n\n    return 1"
    assert from_record(record_id, document, record) == original


# --- context -----------------------------------------------------------------------------------


def test_using_pool_nests_and_current_pool_falls_back_to_a_fresh_one() -> None:
    outer, inner = MessagePool(), MessagePool()
    fallback = current_pool()
    assert isinstance(fallback, MessagePool) and current_pool() is not fallback
    with using_pool(outer):
        assert current_pool() is outer
        with using_pool(inner):
            assert current_pool() is inner
        assert current_pool() is outer
        with ThreadPoolExecutor(1) as executor:  # a new thread does not inherit the context …
            assert executor.submit(current_pool).result() is not outer
            assert executor.submit(bind_pool(outer, current_pool)).result() is outer  # … unless bound
    assert current_pool() is not outer
