"""scratchpad: analyst, coder, tester and reviewer working on one shared scratchpad.

Agents do not pass results to each other; they see each other's work in progress. The analyst
writes an approach and edge cases, the coder writes code reading the analysis, the tester runs
each version on the prompt's visible examples and writes the results, the reviewer reads all of
it and writes a review; the coder revises until the reviewer approves or ``max_iterations``
reviews. In ``parallel`` mode the coder drafts at once, alongside the analyst, and the agents
run in their own threads. Every write is an event on the pool (:mod:`critiquelab.runtime.scratchpad`).
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import Field

from critiquelab.pipelines.agent_counts import agent_counts
from critiquelab.pipelines.params import FeedbackTimeout, MaxIterations, PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.scratchpad.agents import (
    CHANGES,
    CHANNELS,
    AnalystAgent,
    TeamCoderAgent,
    TeamReviewerAgent,
    TesterAgent,
    team_access,
)
from critiquelab.pipelines.scratchpad.outcome import ScratchpadOutcome
from critiquelab.pipelines.threads import converse
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Message
from critiquelab.runtime.scratchpad.events import ScratchpadIntent, UpdateEvent
from critiquelab.runtime.scratchpad.shared import ScratchpadConfig, SharedScratchpad
from critiquelab.signatures.analyst import Analyst
from critiquelab.signatures.scratchpad_coder import ScratchpadCoder
from critiquelab.signatures.scratchpad_reviewer import ScratchpadReviewer


class ScratchpadParams(PipelineParams):
    """Parameters of ``scratchpad``."""

    max_iterations: MaxIterations = Field(
        description="Reviews before the team stops without approval; each review that asks for "
        "changes, but the last, gets one revision.",
    )
    mode: Literal["sequential", "parallel"] = Field(
        default="sequential",
        description="sequential: one agent at a time, the coder starts from the analysis; "
        "parallel: the analyst and the coder start together and agents run in their own threads.",
    )
    max_size_kb: float = Field(
        default=32.0, gt=0, description="Cap on the scratchpad's content in KiB, checked on every write."
    )
    on_overflow: Literal["reject", "drop_oldest"] = Field(
        default="drop_oldest",
        description="A write past the cap: reject (the agent is told and sees the error on its next "
        "read) or drop_oldest (the oldest test results / reviews make room; recorded in the event).",
    )
    feedback_timeout_s: FeedbackTimeout
    log_reads: bool = Field(
        default=False, description="Also publish a read event (agent, channel versions) for every read."
    )


def _team_outcome(history: list[Message], max_reviews: int, thread_id: str) -> tuple[str, ScratchpadOutcome]:
    """Final code and the team's outcome (first code, figures), from the scratchpad's events."""
    updates = [(m, UpdateEvent.model_validate_json(m.content))
               for m in history if m.intent == ScratchpadIntent.UPDATE]
    codes = [u.delta for _, u in updates if u.channel == "code"]
    reviews = [u.delta for _, u in updates if u.channel == "reviews"]
    verdicts = [str(r["verdict"]) for r in reviews]
    if verdicts and verdicts[-1] == "approve":
        stop = "approved"
    elif verdicts and verdicts[-1] == "unparsed":
        stop = "unparsed_review"
    elif len(verdicts) >= max_reviews:
        stop = "max_iterations"
    else:
        stop = "no_review"
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    return codes[-1] if codes else "", ScratchpadOutcome(
        first_code=codes[0] if codes else "", iterations=max(1, len(reviews)),
        parsed=all(t.get("parsed", True) for t in traces), thread_id=thread_id,
        reviews=len(reviews),
        fixes=max(0, len(codes) - 1),
        first_verdict=verdicts[0] if verdicts else "",
        final_verdict=verdicts[-1] if verdicts else "",
        changes_requested=any(v in CHANGES for v in verdicts),
        stop_reason=stop,
        messages=len(history),
        unparsed_steps=sum(1 for t in traces if not t.get("parsed", True)),
        scratchpad_updates=len(updates),
        scratchpad_conflicts=sum(m.intent == ScratchpadIntent.CONFLICT for m in history),
        scratchpad_refused=sum(m.intent == ScratchpadIntent.REFUSED for m in history),
        scratchpad_bytes=updates[-1][1].size_bytes if updates else 0,
        agents=agent_counts(history),
    )


@register_pipeline(
    "scratchpad", params=ScratchpadParams, outcome=ScratchpadOutcome, roles=("analyst", "coder", "reviewer")
)
class ScratchpadTeam(dspy.Module):
    """Analyst, coder, tester and reviewer share a scratchpad (event-sourced channels with
    per-agent rights) instead of passing results; the coder revises until the reviewer approves.

    Parameters: :class:`ScratchpadParams` (``ScratchpadTeam(ScratchpadParams(mode="parallel"))``).
    """

    def __init__(self, params: ScratchpadParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else ScratchpadParams.defaults()
        self.analyst = dspy.Predict(Analyst)
        self.coder = dspy.Predict(ScratchpadCoder)
        self.reviewer = dspy.Predict(ScratchpadReviewer)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        config = ScratchpadConfig(channels=CHANNELS, max_size_kb=self.params.max_size_kb,
                                  on_overflow=self.params.on_overflow, log_reads=self.params.log_reads)
        pad = SharedScratchpad.create(ctx, config, team_access(ctx))
        parallel = self.params.mode == "parallel"
        agents: list[Agent] = [
            AnalystAgent(ctx, pad, self.analyst),
            TeamCoderAgent(ctx, pad, self.coder, draft_at_once=parallel,
                           max_reviews=self.params.max_iterations),
            TesterAgent(ctx, pad, timeout_s=self.params.feedback_timeout_s),
            TeamReviewerAgent(ctx, pad, self.reviewer),
        ]
        # Sequential: the task goes to the analyst; parallel: broadcast, analyst and coder start.
        history = converse(ctx, agents, None if parallel else agents[0].name,
                           parallel=len(agents) if parallel else 1)
        final, outcome = _team_outcome(history, self.params.max_iterations, ctx.thread_id)
        return dspy.Prediction(code=final, outcome=outcome)
