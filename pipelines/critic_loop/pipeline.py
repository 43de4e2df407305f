"""critic_loop: coder → critic → fixer until the critic approves or ``max_iterations``.

Everything goes through the pool: the coder answers the task assignment, the critic reviews
each new version (optionally after running it on the prompt's visible examples), an optional
meta-critic reviews each critique, and the fixer answers reviews that ask for changes.
"""

from __future__ import annotations

import dspy
from pydantic import Field, field_validator

from critiquelab.pipelines.coder_agent import CoderAgent
from critiquelab.pipelines.controls import ORACLE_FEEDBACK, ControlArm
from critiquelab.pipelines.critic_loop.agents import CriticAgent, FixerAgent, MetaCriticAgent
from critiquelab.pipelines.critic_loop.outcome import CriticLoopOutcome
from critiquelab.pipelines.critic_loop.panel import PanelCriticAgent, critics_requesting_changes
from critiquelab.pipelines.params import FeedbackTimeout, MaxIterations, ParallelAgents, PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.roles import Role
from critiquelab.pipelines.threads import run_thread
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.critic import Critic
from critiquelab.signatures.fixer import Fixer
from critiquelab.signatures.focused_critic import FOCUS_INSTRUCTIONS, CriticFocus, FocusedCritic
from critiquelab.signatures.meta_critic import MetaCritic
from critiquelab.signatures.test_results import with_test_results


class CriticLoopParams(PipelineParams):
    """Parameters of ``critic_loop``."""

    max_iterations: MaxIterations = Field(
        description="Critic reviews before the loop stops without approval; each review that asks "
        "for changes gets one fix.",
    )
    execution_feedback: bool = Field(
        default=False,
        description="Run each version on the examples visible in the prompt (never the hidden tests) "
        "and show the critic the results.",
    )
    meta_critic: bool = Field(
        default=False,
        description="A meta-critic reviews each critique before the fixer sees it.",
    )
    feedback_timeout_s: FeedbackTimeout
    critics: list[CriticFocus] = Field(
        default_factory=list,
        description="A panel of critics instead of the one critic, each with its focus; they review "
        "each version concurrently and their reviews reach the fixer as one bundled critique "
        "(empty: the single critic).",
    )
    parallel_agents: ParallelAgents = Field(
        default=1,
        description="Panel critics' model calls in flight at once (1: one after another). Requests "
        "and results do not depend on this. Helps with an endpoint that serves requests in parallel.",
    )
    control: ControlArm

    @field_validator("critics")
    @classmethod
    def _each_critic_once(cls, critics: list[str]) -> list[str]:
        if len(set(critics)) != len(critics):
            raise ValueError(f"each kind at most once (got {critics})")
        return critics


@register_pipeline(
    "critic_loop", params=CriticLoopParams, outcome=CriticLoopOutcome,
    # A panel's critics call the one critic predictor as critic_<focus>: the critic role still.
    roles={"coder": "coder", "critic": Role(("critic",), tuple(f"critic_{k}" for k in FOCUS_INSTRUCTIONS)),
           "fixer": "fixer", "meta_critic": "meta_critic"},
)
class CriticLoop(dspy.Module):
    """Coder → critic → fixer until the critic approves or max_iterations; optionally execution
    feedback from the visible examples, a meta-critic reviewing each critique, and a panel of
    critics with their own focuses whose reviews are bundled for the fixer. As the
    oracle_feedback control the fixer also reads the hidden tests' report on the code it revises.

    Parameters: :class:`CriticLoopParams` (``CriticLoop(CriticLoopParams(max_iterations=2))``).
    """

    def __init__(self, params: CriticLoopParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else CriticLoopParams.defaults()
        self.coder = dspy.Predict(Coder)
        self.critic = dspy.Predict(FocusedCritic) if self.params.critics else dspy.Predict(Critic)
        self.oracle = self.params.control == ORACLE_FEEDBACK
        self.fixer = dspy.Predict(with_test_results(Fixer) if self.oracle else Fixer)
        self.meta_critic = dspy.Predict(MetaCritic) if self.params.meta_critic else None

    def _agents(self, ctx: TaskContext) -> list[Agent]:
        params = self.params
        critic = (
            PanelCriticAgent(ctx, self.critic, critics=params.critics, parallel=params.parallel_agents,
                             max_reviews=params.max_iterations, run_examples=params.execution_feedback,
                             timeout_s=params.feedback_timeout_s)
            if params.critics else
            CriticAgent(ctx, self.critic, max_reviews=params.max_iterations,
                        run_examples=params.execution_feedback, timeout_s=params.feedback_timeout_s)
        )
        agents: list[Agent] = [CoderAgent(ctx, self.coder), critic]
        if self.meta_critic is not None:
            agents.append(MetaCriticAgent(ctx, self.meta_critic))
        listen_to = Intent.META_CRITIQUE if self.meta_critic is not None else Intent.CRITIQUE
        agents.append(FixerAgent(ctx, self.fixer, listen_to=listen_to, oracle=self.oracle))
        return agents

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        prediction = run_thread(ctx, self._agents(ctx), CriticLoopOutcome)
        if self.params.critics:
            prediction.outcome.changes_requested_by = critics_requesting_changes(ctx.history())
        return prediction
