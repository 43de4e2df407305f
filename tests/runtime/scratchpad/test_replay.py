"""Event sourcing: the state replayed from the pool equals the live state after agents wrote
from parallel threads, and a run interrupted mid-way resumes (from Chroma) with the same state."""

import threading

import pytest
from support.pool import HashEmbedder

from critiquelab.core.errors import UserError
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.store import seq_of
from critiquelab.runtime.scratchpad.access import AgentAccess
from critiquelab.runtime.scratchpad.channels import ChannelSpec
from critiquelab.runtime.scratchpad.events import ConflictEvent, ScratchpadIntent
from critiquelab.runtime.scratchpad.replay import replay
from critiquelab.runtime.scratchpad.shared import ScratchpadConfig, SharedScratchpad

CHANNELS = [
    ChannelSpec(name="log", type="append", conflict_policy="merge"),
    ChannelSpec(name="best", type="replace", conflict_policy="last_write_wins"),
    ChannelSpec(name="votes", type="merge", conflict_policy="merge"),
    ChannelSpec(name="lock", type="replace", conflict_policy="reject"),
]
AGENTS = [f"agent{i}" for i in range(6)]
RIGHTS = AgentAccess(read_channels=frozenset(c.name for c in CHANNELS),
                     write_channels=frozenset(c.name for c in CHANNELS))


def _work(pad, agent, rounds, barrier):
    for round_ in range(rounds):
        seen = pad.read(agent).versions
        barrier.wait()  # everybody has read the same versions: every write but one collides
        pad.write(agent, "log", f"{agent}:{round_}", read_version=seen["log"])
        pad.write(agent, "best", agent, read_version=seen["best"])
        pad.write(agent, "votes", {agent: round_, "shared": agent}, read_version=seen["votes"])
        pad.write(agent, "lock", agent, read_version=seen["lock"])
        barrier.wait()


def test_replay_equals_the_live_state_after_a_concurrent_run():
    pool = MessagePool()
    ctx = TaskContext(pool, "t/1", "prompt", "f")
    pad = SharedScratchpad.create(ctx, ScratchpadConfig(channels=CHANNELS), dict.fromkeys(AGENTS, RIGHTS))
    barrier = threading.Barrier(len(AGENTS))
    threads = [threading.Thread(target=_work, args=(pad, a, 5, barrier)) for a in AGENTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    live = pad.state()
    assert len(live["values"]["log"]) == 30  # append + merge policy: no entry lost
    assert live["versions"]["lock"] == 5  # reject: exactly one writer per round got through
    conflicts = [ConflictEvent.model_validate_json(m.content) for m in ctx.history()
                 if m.intent == ScratchpadIntent.CONFLICT]
    assert {c.resolution for c in conflicts} == {"appended", "overwrote", "merged", "rejected"}
    assert sum(c.resolution == "rejected" for c in conflicts) == 25
    # The pool (not the pad's own log) is the source: replay everything it holds for the thread.
    assert replay(pool.history(thread_id=ctx.thread_id), "scratchpad").snapshot() == live
    # Any prefix of the events is a state the scratchpad passed through: versions only grow.
    updates = [m for m in pool.history(thread_id=ctx.thread_id) if m.intent == ScratchpadIntent.UPDATE]
    halfway = replay(pool.history(), "scratchpad", upto_seq=seq_of(updates[len(updates) // 2]))
    assert sum(halfway.versions.values()) == len(updates) // 2 + 1


def test_an_interrupted_run_resumes_with_the_same_state(tmp_path):
    access = {"a": RIGHTS}
    with MessagePool(ChromaPoolStore(tmp_path, embedder=HashEmbedder())) as first:
        ctx = TaskContext(first, "t/1", "prompt", "f")
        pad = SharedScratchpad.create(ctx, ScratchpadConfig(channels=CHANNELS), access)
        pad.write("a", "log", "step 1", read_version=0)
        pad.write("a", "votes", {"x": 1}, read_version=0)
        pad.write("a", "best", "draft", read_version=0)
        before, thread_id = pad.state(), ctx.thread_id
    # A new process: a fresh pool over the same directory, the same thread.
    with MessagePool(ChromaPoolStore(tmp_path, embedder=HashEmbedder())) as second:
        ctx = TaskContext(second, "t/1", "prompt", "f", thread_id=thread_id)
        resumed = SharedScratchpad.resume(ctx, access)
        assert resumed.state() == before
        stale = resumed.write("a", "lock", "held", read_version=0)
        assert stale.applied and not stale.conflict
        assert resumed.write("a", "log", "step 2", read_version=1).version == 2
        final = resumed.state()
        assert replay(second.history(thread_id=thread_id), "scratchpad").snapshot() == final
    assert final["values"]["log"] == ["step 1", "step 2"]


def test_replay_without_an_init_event_says_so():
    with pytest.raises(UserError, match="scratchpad 'pad': no init event on the pool; nothing to replay"):
        replay([], "pad")
