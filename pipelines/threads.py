"""Run a task's agents in one thread of the pool and read the outcome from its messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import dspy
from pydantic import Field

from critiquelab.pipelines.figure_groups import RevisionFigures
from critiquelab.pipelines.outcomes import Outcome
from critiquelab.runtime.agents import MAX_ROUNDS, Agent, TaskContext, code_messages, run_until_quiet
from critiquelab.runtime.parallel_agents import run_agents_concurrently
from critiquelab.runtime.pool.messages import Intent, Message


class ThreadOutcome(Outcome, RevisionFigures):  # type: ignore[misc]  # plugin false positive: see critiquelab.pipelines.outcomes
    """Figures of a coder whose version is reviewed and revised on one thread (baseline,
    self_refine, critic_loop, reflexion): its loop, from the thread's messages alone."""

    reviews: int = Field(description="Reviews of a version (critiques).")
    fixes: int = Field(description="Revised versions.")
    first_verdict: str = Field(description="The first deciding review's verdict ('' without a review).")
    final_verdict: str = Field(description="The last deciding review's verdict ('' without a review).")
    changes_requested: bool = Field(description="Whether a deciding review asked for changes or rejected.")
    stop_reason: str = Field(description="approved, unparsed_critique, max_iterations or no_review.")
    messages: int = Field(description="Messages on the problem's thread.")
    unparsed_steps: int = Field(description="Role calls whose reply could not be parsed.")


class ThreadFigures(TypedDict):
    """The loop's figures of :class:`ThreadOutcome`, by its field names: unpacked into a thread's
    outcome model, a name or type the model does not declare is a type error."""

    reviews: int
    fixes: int
    first_verdict: str
    final_verdict: str
    changes_requested: bool
    stop_reason: str
    messages: int
    unparsed_steps: int


@dataclass(frozen=True)
class ThreadRead:
    """What one thread's messages say: its first and final code, whether every reply parsed, and
    its loop's figures."""

    first_code: str
    final_code: str
    parsed: bool
    figures: ThreadFigures


def thread_outcome(history: list[Message]) -> ThreadRead:
    """First and final code of a thread plus per-task loop metrics, from its messages alone."""
    codes = code_messages(history)
    reviews = [m for m in history if m.intent == Intent.CRITIQUE]
    decisions = [m for m in history if m.intent == Intent.META_CRITIQUE] or reviews
    verdicts = [str(m.metadata.get("verdict")) for m in decisions]
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    if verdicts and verdicts[-1] == "approve":
        stop = "approved"
    elif verdicts and verdicts[-1] == "unparsed":
        stop = "unparsed_critique"
    elif any(m.metadata.get("stop_reason") == "max_iterations" for m in history):
        stop = "max_iterations"
    else:
        stop = "no_review"
    return ThreadRead(
        first_code=codes[0].content if codes else "",
        final_code=codes[-1].content if codes else "",
        parsed=all(t.get("parsed", True) for t in traces),
        figures=ThreadFigures(
            reviews=len(reviews),
            fixes=sum(1 for m in codes if m.intent == Intent.FIX),
            first_verdict=verdicts[0] if verdicts else "",
            final_verdict=verdicts[-1] if verdicts else "",
            changes_requested=any(v in ("request_changes", "reject") for v in verdicts),
            stop_reason=stop,
            messages=len(history),
            unparsed_steps=sum(1 for t in traces if not t.get("parsed", True)),
        ),
    )


def converse(
    ctx: TaskContext, agents: Sequence[Agent], recipient: str | None, *, parallel: int = 1
) -> list[Message]:
    """Assign the task (``recipient=None`` broadcasts it), let the agents react until nobody has
    anything pending, unsubscribe them, and return the thread's messages. With ``parallel`` > 1
    up to that many agents handle their messages at once (each in its own thread)."""
    try:
        ctx.assign(recipient)
        if parallel == 1:
            run_until_quiet(agents)
        else:  # the same bound on work as run_until_quiet's rounds
            run_agents_concurrently(agents, parallel, max_batches=MAX_ROUNDS * len(agents))
    finally:
        for agent in agents:
            agent.close()
    return ctx.history()


def run_thread(
    ctx: TaskContext, agents: Sequence[Agent], outcome: type[ThreadOutcome] = ThreadOutcome
) -> dspy.Prediction:
    """Assign the task to the first agent, let the agents react until quiet, and return the
    final code with its ``outcome`` (the first version and the loop's figures)."""
    found = thread_outcome(converse(ctx, agents, agents[0].name))
    return dspy.Prediction(code=found.final_code, outcome=outcome(
        first_code=found.first_code, iterations=max(1, found.figures["reviews"]),
        parsed=found.parsed, thread_id=ctx.thread_id, **found.figures,
    ))
