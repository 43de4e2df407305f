"""role_play: CAMEL-style role-play. A task specifier makes the task specific; then an
instructor gives one instruction at a time and an assistant answers each with the updated code,
until the instructor says the task is done or ``max_turns`` instructions were given.

The failure modes the CAMEL paper names are detected and end the conversation, the reason
recorded (``stop_reason``): role flipping (the instructor writes code, or the assistant answers
without code), a repeated instruction, a turn without progress (the same code again).
"""

from __future__ import annotations

import dspy
from pydantic import Field

from critiquelab.pipelines.params import FeedbackTimeout, PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.role_play.agents import (
    NO_PROGRESS,
    REPEATED_INSTRUCTION,
    ROLE_FLIP,
    AssistantAgent,
    InstructorAgent,
    TaskSpecifierAgent,
)
from critiquelab.pipelines.role_play.outcome import RolePlayOutcome
from critiquelab.pipelines.threads import converse
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.assistant import Assistant
from critiquelab.signatures.instructor import Instructor
from critiquelab.signatures.task_specifier import TaskSpecifier


class RolePlayParams(PipelineParams):
    """Parameters of ``role_play``."""

    max_turns: int = Field(
        default=4, ge=1, le=20,
        description="Instructions the instructor gives at most (each answered by the assistant).",
    )
    execution_feedback: bool = Field(
        default=True,
        description="Show the instructor the assistant's code run on the prompt's visible examples "
        "(never the hidden tests).",
    )
    feedback_timeout_s: FeedbackTimeout


def role_play_outcome(history: list[Message], thread_id: str) -> tuple[str, RolePlayOutcome]:
    """Final code and the conversation's outcome (first code, figures), from its messages."""
    answers = [m for m in history if m.intent == Intent.ANSWER]
    codes = [m.content for m in answers if not m.metadata["assistant_flipped"]]
    stops = [m for m in history if "stop_reason" in m.metadata]
    reason = str(stops[-1].metadata["stop_reason"]) if stops else "incomplete"
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    unparsed = sum(1 for t in traces if not t.get("parsed", True))
    return codes[-1] if codes else "", RolePlayOutcome(
        first_code=codes[0] if codes else "", iterations=max(1, len(answers)), parsed=unparsed == 0,
        thread_id=thread_id,
        turns=len(answers),
        stop_reason=reason,
        role_flips=int(reason == ROLE_FLIP),
        repeated_instructions=int(reason == REPEATED_INSTRUCTION),
        no_progress_turns=int(reason == NO_PROGRESS),
        messages=len(history),
        unparsed_steps=unparsed,
    )


@register_pipeline(
    "role_play", params=RolePlayParams, outcome=RolePlayOutcome,
    roles=("task_specifier", "instructor", "assistant"),
)
class RolePlay(dspy.Module):
    """CAMEL role-play: a task specifier sharpens the task, then an instructor gives one
    instruction at a time and an assistant answers with code, until done or max_turns; role
    flipping, repeated instructions and turns without progress are detected and stop it.

    Parameters: :class:`RolePlayParams` (``RolePlay(RolePlayParams(max_turns=3))``).
    """

    def __init__(self, params: RolePlayParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else RolePlayParams.defaults()
        self.task_specifier = dspy.Predict(TaskSpecifier)
        self.instructor = dspy.Predict(Instructor)
        self.assistant = dspy.Predict(Assistant)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        specifier = TaskSpecifierAgent(ctx, self.task_specifier)
        instructor = InstructorAgent(
            ctx, self.instructor, max_turns=self.params.max_turns,
            run_examples=self.params.execution_feedback, timeout_s=self.params.feedback_timeout_s,
        )
        history = converse(ctx, [specifier, instructor, AssistantAgent(ctx, self.assistant)], specifier.name)
        final, outcome = role_play_outcome(history, ctx.thread_id)
        return dspy.Prediction(code=final, outcome=outcome)
