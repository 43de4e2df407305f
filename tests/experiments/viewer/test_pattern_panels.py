"""Pattern panels on hand-made histories: a scratchpad with refusals and conflicts (a row per
event on each channel, the state after it as the scratchpad's replay rebuilds it) and an architect
run with a failed, reassigned delegation; model text escaped; no panel without its data."""

import re

from critiquelab.eval.results import ProblemResult
from critiquelab.eval.verdict import Status
from critiquelab.experiments.viewer.pattern_panels import pattern_panels, scratchpad_panel
from critiquelab.pipelines.architect.agents import SessionRef, publish_in
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.scratchpad.access import AgentAccess
from critiquelab.runtime.scratchpad.channels import ChannelSpec
from critiquelab.runtime.scratchpad.shared import ScratchpadConfig, SharedScratchpad
from critiquelab.signatures.team_contracts import (
    ArchitectDecision,
    ArchitectPlan,
    DeveloperInput,
    DeveloperOutput,
    ReviewerOutput,
    TaskAssignment,
    Verification,
)

SCRIPT = "<script>alert(1)</script>"
PASSED = ProblemResult(task_id="t/1", pipeline="p", seed=0, status=Status.PASSED)


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
    assert pattern_panels(ctx.history(), PASSED) == ""


def test_architect_panel_shows_a_failed_delegation_its_reassignment_and_the_review():
    ctx = TaskContext(MessagePool(), "t/1", "prompt", "f")
    root = SessionRef("architect", "orchestrator", "architect")
    task = TaskAssignment(task_id="t1", function_name="f", description="all")
    publish_in(ctx, root, intent="plan", sender="architect", summary="plan",
               contract=ArchitectPlan(tasks=[task], waves=[["t1"]]))
    for attempt, (developer, status) in enumerate([("developer0", "failed"), ("developer1", "completed")], 1):
        asked = publish_in(ctx, root, intent="task_assignment", sender="architect", summary="task t1",
                           contract=DeveloperInput(task=task, allowed_functions=["f"], attempt=attempt))
        session = SessionRef(f"t1/iteration1/attempt{attempt}", "developer", developer, root.id, asked.id)
        publish_in(ctx, session, intent="output.complete", sender=developer, summary=status,
                   contract=DeveloperOutput(task_id="t1", status=status, summary=f"{status} {SCRIPT}"))
        if status == "failed":
            publish_in(ctx, root, intent="decision", sender="architect", summary="reassign",
                       contract=ArchitectDecision(task_id="t1", action="reassign", failed_developer=developer,
                                                  next_developer="developer1", reason="no code"))
    asked = publish_in(ctx, root, intent="review_request", sender="architect", summary="review")
    review = SessionRef("review/iteration1", "reviewer", "reviewer", root.id, asked.id)
    publish_in(ctx, review, intent="critique", sender="reviewer", summary="approved", contract=ReviewerOutput(
        verdict="approved", verification=Verification(examples=2, passed=2, report="ok"), summary="fine"))

    page = pattern_panels(ctx.history(), PASSED)
    sessions = re.findall(r'<li class="session session-(\w+)" data-session="([^"]+)"', page)
    assert sessions == [("orchestrator", "architect"), ("developer", "t1/iteration1/attempt1"),
                        ("developer", "t1/iteration1/attempt2"), ("reviewer", "review/iteration1")]
    facts = re.findall(r'<li class="fact">(.*?)</li>', page)
    assert facts == [
        "plan: t1 (f)", "decision on t1: reassign (no code)",
        "task t1 (f), attempt 1", "status failed: failed &lt;script&gt;alert(1)&lt;/script&gt;",
        "task t1 (f), attempt 2", "status completed: completed &lt;script&gt;alert(1)&lt;/script&gt;",
        "verdict approved: fine (visible examples 2/2)",
    ]
    assert SCRIPT not in page


def test_vote_panel_shows_the_greedy_answer_and_marks_the_chosen_one():
    from critiquelab.experiments.viewer.pattern_panels import vote_panel
    from critiquelab.runtime.pool.messages import Intent

    def history(greedy_passed: bool, samples: int) -> list:
        ctx = TaskContext(MessagePool(), "t/1", "prompt", "f")
        ctx.publish(intent=Intent.PROPOSAL, sender="sampler", content="g", summary="greedy answer",
                    greedy=True, visible_passed=greedy_passed)
        for index in range(samples):
            ctx.publish(intent=Intent.PROPOSAL, sender="sampler", content=f"s{index}",
                        summary=f"sample {index + 1}", sample=index)
        chosen = -1 if greedy_passed else 1
        ctx.publish(intent=Intent.VERDICT, sender="voter", content="x", summary="chosen", chosen=chosen,
                    largest_group=1, samples=samples, visible_passing=1)
        return ctx.pool.history(thread_id=ctx.thread_id)

    kept = vote_panel(history(True, 0))
    assert "<b>chosen</b> greedy answer" in kept and "passes the visible examples" in kept
    sampled = vote_panel(history(False, 3))
    assert "fails the visible examples" in sampled and "<b>chosen</b> sample 2" in sampled
    assert "<b>chosen</b> greedy" not in sampled and sampled.count("<li>") == 4
