"""The agents of the scratchpad team: analyst, coder, tester and reviewer, who coordinate only
through a shared scratchpad. Each reacts to the scratchpad's update events on the pool (an
agent never hears its own), reads what its rights show it, and writes its result back."""

from __future__ import annotations

import json
from typing import Any

import dspy

from critiquelab.eval.visible_examples import code_feedback, visible_examples
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role, fell_back
from critiquelab.runtime.scratchpad.access import AgentAccess
from critiquelab.runtime.scratchpad.channels import ChannelSpec
from critiquelab.runtime.scratchpad.events import ScratchpadIntent
from critiquelab.runtime.scratchpad.shared import SharedScratchpad, Snapshot
from critiquelab.signatures.review import Finding

CHANGES = ("request_changes", "reject")

# analysis: the analyst's approach and edge cases (merge: each key its own); code: the current
# version (replace; only the coder writes it); test_results and reviews: one entry per version.
CHANNELS = [
    ChannelSpec(name="analysis", type="merge", conflict_policy="merge"),
    ChannelSpec(name="code", type="replace", conflict_policy="reject"),
    ChannelSpec(name="test_results", type="append", conflict_policy="merge"),
    ChannelSpec(name="reviews", type="append", conflict_policy="merge"),
]
RIGHTS = {
    "analyst": AgentAccess(write_channels=frozenset({"analysis"})),
    "coder": AgentAccess(read_channels=frozenset({"analysis", "code", "test_results", "reviews"}),
                         write_channels=frozenset({"code"})),
    "tester": AgentAccess(read_channels=frozenset({"code"}), write_channels=frozenset({"test_results"})),
    "reviewer": AgentAccess(read_channels=frozenset({"analysis", "code", "test_results", "reviews"}),
                            write_channels=frozenset({"reviews"})),
}


def team_access(ctx: TaskContext) -> dict[str, AgentAccess]:
    """Each role's rights under its agent name in this thread."""
    return {ctx.agent_name(role): rights for role, rights in RIGHTS.items()}


def render(snapshot: Snapshot, refused: str = "") -> str:
    """The scratchpad as a role reads it: one section per readable, non-empty channel."""
    parts = []
    for name, value in snapshot.values.items():
        if value in (None, [], {}):
            continue
        text = value if isinstance(value, str) else json.dumps(value, indent=1)
        parts.append(f"## {name} (version {snapshot.versions[name]})\n{text}")
    if refused:
        parts.append(f"## your last write was refused\n{refused}")
    return "\n\n".join(parts) or "empty"


def _on_channel(message: Message, *channels: str) -> bool:
    return message.intent == ScratchpadIntent.UPDATE and message.metadata.get("channel") in channels


class ScratchpadAgent(Agent):
    """An agent with a scratchpad: it writes as itself and keeps the error of a refused write."""

    def __init__(self, ctx: TaskContext, pad: SharedScratchpad) -> None:
        super().__init__(ctx)
        self.pad = pad
        self.refused = ""

    def write(self, channel: str, delta: Any, read_version: int, **metadata: Any) -> bool:
        result = self.pad.write(self.name, channel, delta, read_version=read_version, **metadata)
        self.refused = result.error
        return result.applied


class AnalystAgent(ScratchpadAgent):
    """Answers the task with an approach and edge cases on the ``analysis`` channel."""

    role = "analyst"

    def __init__(self, ctx: TaskContext, pad: SharedScratchpad, analyst: dspy.Module) -> None:
        super().__init__(ctx, pad)
        self.analyst = analyst
        self.listen([Intent.TASK_ASSIGNMENT])

    def handle(self, message: Message) -> None:
        step = call_role(self.analyst, self.role, prompt=self.ctx.prompt)
        analysis = {
            "approach": str(step.approach or step.raw or "none"),
            "edge_cases": [str(case) for case in step.edge_cases or []],
        }
        self.write("analysis", analysis, 0, step=step)


class TeamCoderAgent(ScratchpadAgent):
    """Writes the code: a first version (on the analysis, or at once in parallel mode), then a
    revision after each review that asks for changes, while reviews remain."""

    role = "coder"

    def __init__(
        self, ctx: TaskContext, pad: SharedScratchpad, coder: dspy.Module, *,
        draft_at_once: bool, max_reviews: int,
    ) -> None:
        super().__init__(ctx, pad)
        self.coder, self.draft_at_once, self.max_reviews = coder, draft_at_once, max_reviews
        self.listen([ScratchpadIntent.UPDATE, *([Intent.TASK_ASSIGNMENT] if draft_at_once else [])])

    def handle(self, message: Message) -> None:
        if message.intent == Intent.TASK_ASSIGNMENT or (
            _on_channel(message, "analysis") and not self.draft_at_once
        ):
            self._code("first implementation")
        elif _on_channel(message, "reviews"):
            entry = self.pad.read(self.name, ["reviews"]).values["reviews"][-1]
            if entry["verdict"] in CHANGES and entry["review"] < self.max_reviews:
                self._code(f"revision after review {entry['review']}")

    def _code(self, summary: str) -> None:
        snapshot = self.pad.read(self.name)
        step = call_role(self.coder, self.role, prompt=self.ctx.prompt,
                         scratchpad=render(snapshot, self.refused))
        code = step.code or step.raw or snapshot.values.get("code") or ""
        self.write("code", code, snapshot.versions["code"], step=step, note=summary)


class TesterAgent(ScratchpadAgent):
    """Runs each new version of the code on the prompt's visible examples (never the hidden
    tests) and writes the results to ``test_results``."""

    role = "tester"

    def __init__(self, ctx: TaskContext, pad: SharedScratchpad, *, timeout_s: float) -> None:
        super().__init__(ctx, pad)
        self.timeout_s = timeout_s
        self.examples = visible_examples(ctx.prompt, ctx.entry_point)
        self.listen([ScratchpadIntent.UPDATE])

    def handle(self, message: Message) -> None:
        if not _on_channel(message, "code"):
            return
        snapshot = self.pad.read(self.name, ["code"])
        feedback = code_feedback(self.ctx.prompt, snapshot.values["code"] or "", self.ctx.entry_point,
                                 self.examples, timeout_s=self.timeout_s)
        entry = {
            "code_version": snapshot.versions["code"], "examples": len(self.examples),
            "passed": feedback.passed, "report": feedback.report,
        }
        self.write("test_results", entry, self.pad.read(self.name, ["test_results"]).versions.get(
            "test_results", 0))


class TeamReviewerAgent(ScratchpadAgent):
    """Reviews each version once its test results (and the analysis) are on the scratchpad; an
    unparseable review is recorded as such, never as an approval."""

    role = "reviewer"

    def __init__(self, ctx: TaskContext, pad: SharedScratchpad, reviewer: dspy.Module) -> None:
        super().__init__(ctx, pad)
        self.reviewer = reviewer
        self.reviewed: set[int] = set()
        self.listen([ScratchpadIntent.UPDATE])

    def handle(self, message: Message) -> None:
        if not _on_channel(message, "test_results", "analysis"):
            return
        snapshot = self.pad.read(self.name)
        tests, code_version = snapshot.values["test_results"], snapshot.versions["code"]
        ready = bool(snapshot.values["analysis"]) and tests and tests[-1]["code_version"] == code_version
        # The coder revises only while reviews remain, so at most max_reviews versions come here.
        if not ready or code_version in self.reviewed:
            return
        self.reviewed.add(code_version)
        step = call_role(self.reviewer, self.role, prompt=self.ctx.prompt,
                         scratchpad=render(snapshot, self.refused))
        verdict = str(step.verdict) if step.parsed else "unparsed"
        if not step.parsed:  # the team stops without the review's say: a fallback
            fell_back(self.role)
        findings = [f.model_dump() if isinstance(f, Finding) else f for f in step.findings or []]
        entry = {"review": len(self.reviewed), "code_version": code_version, "verdict": verdict,
                 "findings": findings, "summary": str(step.summary or step.raw)}
        self.write("reviews", entry, snapshot.versions["reviews"], step=step, verdict=verdict)
