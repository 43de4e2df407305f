"""The scratchpad panel on a scratchpad with refusals and conflicts: one row per event on each
channel, the state after it as the scratchpad's replay rebuilds it, model text escaped."""

import re

from experiments.viewer.data import Problem
from experiments.viewer.pattern_panels import pattern_panels, scratchpad_panel
from pipelines.agents import TaskContext
from pipelines.pool.message_pool import MessagePool
from pipelines.scratchpad.access import AgentAccess
from pipelines.scratchpad.channels import ChannelSpec
from pipelines.scratchpad.shared import ScratchpadConfig, SharedScratchpad

SCRIPT = "<script>alert(1)</script>"


def _channel_rows(page: str, channel: str) -> list[str]:
    table = re.search(rf'<table class="channel" data-channel="{channel}">(.*?)</table>', page, re.S).group(1)
    return re.findall(r'<tr class="pad-event (\w+)">', table)


def test_each_channel_lists_its_events_with_refusals_and_conflicts_marked():
    ctx = TaskContext(MessagePool(), "t/1", "prompt", "f")
    both = AgentAccess(read_channels=frozenset({"log", "code"}), write_channels=frozenset({"log", "code"}))
    config = ScratchpadConfig(channels=[ChannelSpec(name="log", type="append"),
                                        ChannelSpec(name="code", type="replace", conflict_policy="reject")])
    pad = SharedScratchpad.create(ctx, config, {"writer": both, "other": both,
                                                "reader": AgentAccess(read_channels=frozenset({"log"}))})
    pad.write("writer", "log", f"first {SCRIPT}", read_version=0)
    pad.write("other", "log", "second", read_version=0)  # stale read: last write wins, a conflict
    pad.write("reader", "log", "third", read_version=2)  # no write right: refused
    pad.write("writer", "code", "def f(): pass", read_version=0)
    pad.write("other", "code", "def f(): return 1", read_version=0)  # stale under reject: refused

    page = scratchpad_panel(ctx.history())
    assert _channel_rows(page, "log") == ["update", "conflict", "update", "refused"]
    assert _channel_rows(page, "code") == ["update", "conflict", "refused"]
    assert "refused (access): reader may not write" in page
    assert "last_write_wins → overwrote" in page and "reject → rejected" in page
    # The value after each event: the refused second write left the first code in place.
    last_code_row = page.rsplit('<tr class="pad-event refused">', 1)[1]
    assert "def f(): pass" in last_code_row and "return 1" not in last_code_row
    assert SCRIPT not in page and "first &lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_problem_without_pattern_data_has_no_pattern_panel():
    ctx = TaskContext(MessagePool(), "t/1", "prompt", "f")
    ctx.publish(intent="output.complete", sender="coder", content="def f(): pass", summary="draft")
    assert pattern_panels(ctx.history(), Problem(task_id="t/1", status="passed")) == ""
