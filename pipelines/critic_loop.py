"""critic_loop: coder → critic → fixer until the critic approves or ``max_iterations``.

Everything goes through the pool: the coder answers the task assignment, the critic reviews
each new version (optionally after running it on the prompt's visible examples), an optional
meta-critic reviews each critique, and the fixer answers reviews that ask for changes.
"""

from __future__ import annotations

import dspy

from pipelines.agents import Agent, TaskContext
from pipelines.critic_agents import CoderAgent, CriticAgent, FixerAgent, MetaCriticAgent
from pipelines.messages import Intent
from pipelines.pool_context import current_pool
from pipelines.registry import register_pipeline
from pipelines.threads import run_thread
from signatures.coder import Coder
from signatures.critic import Critic
from signatures.fixer import Fixer
from signatures.meta_critic import MetaCritic


@register_pipeline("critic_loop")
class CriticLoop(dspy.Module):
    """Coder, critic and fixer (and optionally a meta-critic) reacting to each other's messages."""

    def __init__(
        self,
        max_iterations: int = 3,
        execution_feedback: bool = False,
        meta_critic: bool = False,
        feedback_timeout_s: float = 5.0,
    ) -> None:
        super().__init__()
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.max_iterations = max_iterations
        self.execution_feedback = execution_feedback
        self.feedback_timeout_s = feedback_timeout_s
        self.coder = dspy.Predict(Coder)
        self.critic = dspy.Predict(Critic)
        self.fixer = dspy.Predict(Fixer)
        self.meta_critic = dspy.Predict(MetaCritic) if meta_critic else None

    def _agents(self, ctx: TaskContext) -> list[Agent]:
        agents: list[Agent] = [
            CoderAgent(ctx, self.coder),
            CriticAgent(
                ctx, self.critic, max_reviews=self.max_iterations,
                run_examples=self.execution_feedback, timeout_s=self.feedback_timeout_s,
            ),
        ]
        if self.meta_critic is not None:
            agents.append(MetaCriticAgent(ctx, self.meta_critic))
        listen_to = Intent.META_CRITIQUE if self.meta_critic is not None else Intent.CRITIQUE
        agents.append(FixerAgent(ctx, self.fixer, listen_to=listen_to))
        return agents

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        return run_thread(ctx, self._agents(ctx))
