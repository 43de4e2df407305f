"""``plan_first``: a planner writes a short numbered plan, then the coder implements the
function following it — two roles talking through critiquelab's message pool.

Everything a pipeline declares is here: its signature (the planner's; the coder's too, as it
takes the plan), its params model, its outcome model (the per-problem figures), and the
``dspy.Module`` registered under its name. The package's pyproject names the class in the
``critiquelab.pipelines`` entry-point group; nothing in critiquelab is edited.
"""

from __future__ import annotations

import dspy
from pydantic import Field

from critiquelab.pipelines.params import PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.threads import ThreadOutcome, converse, thread_outcome
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role


class Plan(dspy.Signature):
    """Plan how to implement the Python function described by the prompt: a few short steps, in
    order, each one sentence. Mention the edge cases the docstring implies. Write no code."""

    prompt: str = dspy.InputField(desc="A Python function signature with a docstring.")
    steps: list[str] = dspy.OutputField(desc="The implementation steps, in order, one sentence each.")


class CodeFromPlan(dspy.Signature):
    """You are an expert Python programmer. Implement the function described by the prompt,
    following the plan. Write the complete function: its `def` line exactly as given, then a
    correct body. Use only the standard library. Do not include tests, examples or prints."""

    prompt: str = dspy.InputField(desc="A Python function signature with a docstring.")
    plan: str = dspy.InputField(desc="Numbered implementation steps to follow.")
    code: str = dspy.OutputField(desc="The complete Python implementation of the function, as plain code.")


class PlanFirstParams(PipelineParams):
    """Parameters of ``plan_first``."""

    max_steps: int = Field(
        default=5, ge=1, le=12,
        description="Plan steps passed on to the coder; the planner's later ones are dropped.",
    )


class PlanFirstOutcome(ThreadOutcome):
    """Figures of ``plan_first``: its thread's, and the plan's length."""

    plan_steps: int = Field(description="Steps the coder was given (0: the plan could not be read).")


class PlannerAgent(Agent):
    """Answers the task assignment with a plan, addressed to the coder."""

    role = "planner"

    def __init__(self, ctx: TaskContext, planner: dspy.Module, max_steps: int) -> None:
        super().__init__(ctx)
        self.planner, self.max_steps = planner, max_steps
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def handle(self, message: Message) -> None:
        step = call_role(self.planner, self.role, prompt=self.ctx.prompt)
        steps = [str(s) for s in step.steps or []][: self.max_steps]
        plan = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        self.ctx.publish(intent=Intent.PLAN, sender=self.name, recipient=self.ctx.agent_name("coder"),
                         content=plan, summary=f"{len(steps)}-step plan", in_reply_to=message.id,
                         step=step, steps=len(steps))


class PlannedCoderAgent(Agent):
    """Answers the plan with the implementation."""

    role = "coder"

    def __init__(self, ctx: TaskContext, coder: dspy.Module) -> None:
        super().__init__(ctx)
        self.coder = coder
        self.listen([Intent.PLAN], to_me_only=True)

    def handle(self, message: Message) -> None:
        step = call_role(self.coder, self.role, prompt=self.ctx.prompt, plan=message.content or "none")
        self.ctx.publish(
            intent=Intent.OUTPUT_COMPLETE, sender=self.name, content=step.code or step.raw,
            summary="implementation following the plan", in_reply_to=message.id, step=step,
        )


@register_pipeline("plan_first", params=PlanFirstParams, outcome=PlanFirstOutcome, roles=("planner", "coder"))
class PlanFirst(dspy.Module):
    """A planner writes numbered steps, then the coder implements the function following them."""

    def __init__(self, params: PlanFirstParams | None = None) -> None:
        super().__init__()
        self.params = params if params is not None else PlanFirstParams.defaults()
        self.planner = dspy.Predict(Plan)
        self.coder = dspy.Predict(CodeFromPlan)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        planner = PlannerAgent(ctx, self.planner, self.params.max_steps)
        history = converse(ctx, [planner, PlannedCoderAgent(ctx, self.coder)], planner.name)
        found = thread_outcome(history)
        plans = [m for m in history if m.intent == Intent.PLAN]
        return dspy.Prediction(code=found.final_code, outcome=PlanFirstOutcome(
            first_code=found.first_code, parsed=found.parsed, thread_id=ctx.thread_id,
            plan_steps=int(plans[-1].metadata.get("steps", 0)) if plans else 0, **found.figures,
        ))
