"""SharedScratchpad's rules, each visible as events on the pool: access control, the size cap,
conflicts under each channel policy."""

import pytest

from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.scratchpad.access import AgentAccess
from critiquelab.runtime.scratchpad.channels import ChannelSpec
from critiquelab.runtime.scratchpad.events import ConflictEvent, RefusedEvent, ScratchpadIntent, UpdateEvent
from critiquelab.runtime.scratchpad.replay import replay
from critiquelab.runtime.scratchpad.shared import ScratchpadConfig, SharedScratchpad

ALL = frozenset({"log", "code", "notes"})


def _pad(**config):
    channels = config.pop("channels", [
        ChannelSpec(name="log", type="append"),
        ChannelSpec(name="code", type="replace"),
        ChannelSpec(name="notes", type="merge"),
    ])
    ctx = TaskContext(MessagePool(), "t/1", "prompt", "f")
    access = {
        "writer": AgentAccess(read_channels=ALL, write_channels=ALL),
        "other": AgentAccess(read_channels=ALL, write_channels=ALL),
        "reader": AgentAccess(read_channels=frozenset({"log"})),
    }
    return SharedScratchpad.create(ctx, ScratchpadConfig(channels=channels, **config), access), ctx


def _events(ctx, intent, model):
    return [model.model_validate_json(m.content) for m in ctx.history() if m.intent == intent]


def test_writes_are_update_events_and_versions_count_per_channel():
    pad, ctx = _pad()
    assert pad.write("writer", "log", "one", read_version=0).version == 1
    assert pad.write("writer", "log", "two", read_version=1).version == 2
    assert pad.write("writer", "code", "def f(): pass", read_version=0).version == 1
    assert pad.write("writer", "notes", {"a": 1}, read_version=0).applied
    snapshot = pad.read("writer")
    assert snapshot.values == {"log": ["one", "two"], "code": "def f(): pass", "notes": {"a": 1}}
    assert snapshot.versions == {"log": 2, "code": 1, "notes": 1}
    updates = _events(ctx, ScratchpadIntent.UPDATE, UpdateEvent)
    assert [(u.agent, u.channel, u.operation, u.version) for u in updates] == [
        ("writer", "log", "append", 1), ("writer", "log", "append", 2),
        ("writer", "code", "replace", 1), ("writer", "notes", "merge", 1),
    ]
    assert updates[-1].size_bytes == pad.size_bytes()
    assert ctx.history()[0].intent == ScratchpadIntent.INIT


def test_a_write_outside_the_agents_rights_is_refused_and_recorded():
    pad, ctx = _pad()
    result = pad.write("reader", "log", "sneaky", read_version=0)
    assert not result.applied and result.error == "reader may not write 'log'"
    unknown = pad.write("stranger", "code", "x", read_version=0)
    assert not unknown.applied and unknown.error == "stranger may not write 'code'"
    assert pad.state()["values"]["log"] == [] and pad.state()["versions"]["log"] == 0
    refused = _events(ctx, ScratchpadIntent.REFUSED, RefusedEvent)
    assert [(r.agent, r.channel, r.reason) for r in refused] == [("reader", "log", "access"),
                                                                 ("stranger", "code", "access")]
    assert not [m for m in ctx.history() if m.intent == ScratchpadIntent.UPDATE]


def test_a_read_outside_the_agents_rights_returns_nothing():
    pad, _ = _pad()
    pad.write("writer", "code", "secret", read_version=0)
    pad.write("writer", "log", "public", read_version=0)
    assert pad.read("reader").values == {"log": ["public"]}
    assert pad.read("reader", ["code"]).values == {}
    assert pad.read("nobody").values == {} and pad.read("nobody").versions == {}


def test_bad_values_and_unknown_channels_are_refused_with_the_reason():
    pad, ctx = _pad()
    assert pad.write("writer", "notes", ["x"], read_version=0).error == (
        "a merge channel takes a mapping of string keys to values")
    assert pad.write("writer", "nope", 1, read_version=0).error == "no channel 'nope'"
    reasons = [r.reason for r in _events(ctx, ScratchpadIntent.REFUSED, RefusedEvent)]
    assert reasons == ["bad_value", "unknown_channel"]


def test_the_size_cap_rejects_a_write_that_would_pass_it():
    pad, ctx = _pad(max_size_kb=0.1)  # 102 bytes; the empty channels weigh 36
    assert pad.write("writer", "log", "x" * 40, read_version=0).applied
    result = pad.write("writer", "log", "y" * 40, read_version=1)
    assert not result.applied
    assert "over its cap of 0.1 KiB (102 bytes)" in result.error
    assert pad.state()["values"]["log"] == ["x" * 40]
    assert [r.reason for r in _events(ctx, ScratchpadIntent.REFUSED, RefusedEvent)] == ["size_cap"]
    assert pad.size_bytes() <= 102


def test_drop_oldest_keeps_the_newest_entries_and_the_replay_agrees():
    pad, ctx = _pad(max_size_kb=0.1, on_overflow="drop_oldest")
    for i in range(5):
        assert pad.write("writer", "log", f"{i}" * 20, read_version=i).applied
        assert pad.size_bytes() <= 102
    assert pad.state()["values"]["log"] == ["2" * 20, "3" * 20, "4" * 20]
    dropped = [u.dropped for u in _events(ctx, ScratchpadIntent.UPDATE, UpdateEvent)]
    assert dropped == [0, 0, 0, 1, 1]
    # What cannot fit even alone is still rejected, on a replace channel as on an append one.
    assert "over its cap" in pad.write("writer", "code", "z" * 200, read_version=0).error
    assert "over its cap" in pad.write("writer", "log", "z" * 200, read_version=5).error
    assert replay(ctx.history(), "scratchpad").snapshot() == pad.state()


@pytest.mark.parametrize(
    ("kind", "policy", "first", "second", "resolution", "value"),
    [
        ("append", "last_write_wins", "a", "b", "overwrote", ["a", "b"]),
        ("append", "merge", "a", "b", "appended", ["a", "b"]),
        ("append", "reject", "a", "b", "rejected", ["a"]),
        ("replace", "last_write_wins", "a", "b", "overwrote", "b"),
        ("replace", "reject", "a", "b", "rejected", "a"),
        ("merge", "last_write_wins", {"k": 1, "x": 1}, {"k": 2, "y": 2}, "overwrote",
         {"k": 2, "x": 1, "y": 2}),
        ("merge", "merge", {"k": 1, "x": 1}, {"k": 2, "y": 2}, "merged", {"k": 1, "x": 1, "y": 2}),
        ("merge", "reject", {"k": 1}, {"k": 2}, "rejected", {"k": 1}),
    ],
)
def test_a_stale_write_is_a_conflict_resolved_by_the_channel_policy(
    kind, policy, first, second, resolution, value
):
    pad, ctx = _pad(channels=[ChannelSpec(name="log", type=kind, conflict_policy=policy)])
    seen = pad.read("other").versions["log"]  # both read version 0 ...
    assert pad.write("writer", "log", first, read_version=0).applied
    result = pad.write("other", "log", second, read_version=seen)  # ... other writes second
    assert result.conflict and result.applied == (resolution != "rejected")
    assert pad.state()["values"]["log"] == value
    (conflict,) = _events(ctx, ScratchpadIntent.CONFLICT, ConflictEvent)
    assert (conflict.agent, conflict.policy, conflict.resolution) == ("other", policy, resolution)
    assert (conflict.read_version, conflict.current_version) == (0, 1)
    if resolution == "merged":
        assert conflict.conflicting_keys == ["k"]
    if resolution == "rejected":
        assert "changed since you read it (version 0, now 1); read it again" in result.error
        assert [r.reason for r in _events(ctx, ScratchpadIntent.REFUSED, RefusedEvent)] == ["conflict"]
    assert replay(ctx.history(), "scratchpad").snapshot() == pad.state()


def test_merge_policy_only_keeps_keys_changed_after_the_writers_read():
    pad, _ = _pad(channels=[ChannelSpec(name="notes", type="merge", conflict_policy="merge")])
    pad.write("writer", "notes", {"old": 1}, read_version=0)  # version 1
    pad.write("writer", "notes", {"new": 1}, read_version=1)  # version 2
    # "other" read at version 1: "old" was already there, "new" came after.
    pad.write("other", "notes", {"old": 2, "new": 2, "mine": 2}, read_version=1)
    assert pad.state()["values"]["notes"] == {"old": 2, "new": 1, "mine": 2}


def test_reads_are_logged_when_asked():
    pad, ctx = _pad(log_reads=True)
    pad.read("reader")
    pad.read("nobody")  # nothing readable: nothing read, nothing logged
    reads = [m for m in ctx.history() if m.intent == ScratchpadIntent.READ]
    assert len(reads) == 1 and reads[0].sender == "reader"
