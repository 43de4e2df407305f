"""self_refine: one model critiques its own output and refines it (Madaan et al., 2023).

Unlike the critic loop there is no separate reviewer persona with a structured review: the
author gives itself free-text feedback and a stop flag, then revises, through the pool.
"""

from __future__ import annotations

from typing import Any

import dspy
from pydantic import Field

from critiquelab.pipelines.coder_agent import CoderAgent
from critiquelab.pipelines.controls import ORACLE_FEEDBACK, ControlArm, oracle_feedback
from critiquelab.pipelines.params import MaxIterations, PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.threads import ThreadOutcome, run_thread
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role, fell_back
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.fixer import Fixer
from critiquelab.signatures.self_refine import SelfFeedback
from critiquelab.signatures.test_results import with_test_results


class SelfReviewAgent(Agent):
    """The author reviewing its own latest version."""

    role = "self_feedback"

    def __init__(self, ctx: TaskContext, feedback: dspy.Module, max_reviews: int) -> None:
        super().__init__(ctx)
        self.feedback = feedback
        self.max_reviews = max_reviews
        self.reviews = 0
        self.listen([Intent.OUTPUT_COMPLETE, Intent.FIX])

    def handle(self, message: Message) -> None:
        if self.reviews >= self.max_reviews:
            self.ctx.publish(intent=Intent.STATUS, sender=self.name, summary="max_iterations reached",
                             in_reply_to=message.id, stop_reason="max_iterations")
            return
        self.reviews += 1
        step = call_role(self.feedback, self.role, prompt=self.ctx.prompt, code=message.content,
                         execution_feedback="none")
        if not step.parsed:  # the loop ends without the self-review's say: a fallback
            verdict, text = "unparsed", step.raw
            fell_back(self.role)
        else:
            verdict = "approve" if step.is_correct else "request_changes"
            text = step.feedback or ""
        self.ctx.publish(
            intent=Intent.CRITIQUE, sender=self.name, content=text, summary=f"self-review: {verdict}",
            in_reply_to=message.id, step=step, verdict=verdict, iteration=self.reviews,
            code_message_id=message.id,
        )


class SelfRefineAgent(Agent):
    """The author revising its code from its own feedback; as the oracle_feedback control
    (``oracle``) also from the hidden tests' report on that code."""

    role = "self_refiner"

    def __init__(self, ctx: TaskContext, refiner: dspy.Module, *, oracle: bool = False) -> None:
        super().__init__(ctx)
        self.refiner = refiner
        self.oracle = oracle
        self.listen([Intent.CRITIQUE])

    def handle(self, message: Message) -> None:
        if message.metadata.get("verdict") != "request_changes":
            return
        code = self.ctx.pool_message(message.metadata["code_message_id"]).content
        # Only the control adds the field: every other run's request is the same as before.
        control: dict[str, Any] = {"test_results": oracle_feedback(code)} if self.oracle else {}
        step = call_role(self.refiner, self.role, prompt=self.ctx.prompt, code=code, review=message.content,
                         **control)
        self.ctx.publish(intent=Intent.FIX, sender=self.name,
                         content=step.revised_code or step.raw or code,
                         summary="self-refinement", in_reply_to=message.id, step=step)


class SelfRefineParams(PipelineParams):
    """Parameters of ``self_refine``."""

    max_iterations: MaxIterations = Field(
        description="Self-reviews before the loop stops without the author judging its code correct.",
    )
    control: ControlArm


@register_pipeline(
    "self_refine", params=SelfRefineParams, outcome=ThreadOutcome,
    roles={"coder": "coder", "self_feedback": "feedback", "self_refiner": "refiner"},
)
class SelfRefine(dspy.Module):
    """The author reviews its own code and refines it, until its review says correct or
    max_iterations; as the oracle_feedback control the refiner also reads the hidden tests' report.

    Parameters: :class:`SelfRefineParams` (``SelfRefine(SelfRefineParams(max_iterations=2))``).
    """

    def __init__(self, params: SelfRefineParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else SelfRefineParams.defaults()
        self.coder = dspy.Predict(Coder)
        self.feedback = dspy.Predict(SelfFeedback)
        self.oracle = self.params.control == ORACLE_FEEDBACK
        self.refiner = dspy.Predict(with_test_results(Fixer) if self.oracle else Fixer)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        agents = [
            CoderAgent(ctx, self.coder),
            SelfReviewAgent(ctx, self.feedback, self.params.max_iterations),
            SelfRefineAgent(ctx, self.refiner, oracle=self.oracle),
        ]
        return run_thread(ctx, agents)
