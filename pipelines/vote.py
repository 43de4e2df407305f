"""vote: k independent samples, the answer chosen by agreement on the visible examples.

The equal-compute baseline for debate (CodeT-style): run every sample on the prompt's visible
example inputs, group samples that behave identically, answer with the largest group. With
``token_budget`` it keeps sampling until that many tokens are spent (up to ``max_samples``),
so its cost can match another pipeline's measured tokens per problem.
"""

from __future__ import annotations

from typing import Any

import dspy
from pydantic import Field, model_validator

from eval.behaviour import behaviour_signatures, largest_group
from eval.errors import UserError
from eval.usage import current_meter
from pipelines.agents import Agent, TaskContext, sampling_config
from pipelines.messages import Intent, Message
from pipelines.params import PipelineParams
from pipelines.pool_context import current_pool
from pipelines.registry import register_pipeline
from pipelines.role_call import call_role
from pipelines.threads import converse
from signatures.coder import Coder


class SamplerAgent(Agent):
    """Draws independent samples for the task, then tells the voter it is done."""

    role = "sampler"

    def __init__(
        self, ctx: TaskContext, coder: dspy.Module, *, k: int, temperature: float,
        token_budget: float | None, max_samples: int,
    ) -> None:
        super().__init__(ctx)
        self.coder, self.k, self.temperature = coder, k, temperature
        self.token_budget, self.max_samples = token_budget, max_samples
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def _more(self, drawn: int) -> bool:
        if self.token_budget is None:
            return drawn < self.k
        meter = current_meter()
        spent = meter.total().prompt_tokens + meter.total().completion_tokens if meter else 0
        return drawn < self.max_samples and (drawn == 0 or spent < self.token_budget)

    def handle(self, message: Message) -> None:
        drawn = 0
        while self._more(drawn):
            step = call_role(
                self.coder, "coder", config=sampling_config(drawn, self.temperature), prompt=self.ctx.prompt
            )
            self.ctx.publish(
                intent=Intent.PROPOSAL, sender=self.name, content=step.get("code") or step.raw,
                summary=f"sample {drawn + 1}", in_reply_to=message.id, step=step, sample=drawn,
            )
            drawn += 1
        self.ctx.publish(intent=Intent.STATUS, sender=self.name, summary=f"{drawn} samples drawn",
                         samples=drawn)


class VoterAgent(Agent):
    """Groups the samples by behaviour on the visible examples and answers with the largest group."""

    role = "voter"

    def __init__(self, ctx: TaskContext) -> None:
        super().__init__(ctx)
        self.samples: list[Message] = []
        self.listen([Intent.PROPOSAL, Intent.STATUS])

    def handle(self, message: Message) -> None:
        if message.intent == Intent.PROPOSAL:
            self.samples.append(message)
            return
        codes = [m.content for m in self.samples]
        group = largest_group(behaviour_signatures(self.ctx.prompt, self.ctx.entry_point, codes))
        chosen = group[0] if group else 0
        self.ctx.publish(
            intent=Intent.VERDICT, sender=self.name, content=codes[chosen] if codes else "",
            summary=f"largest group: {len(group)} of {len(codes)} samples", chosen=chosen,
            largest_group=len(group), samples=len(codes),
        )


# The one parameter the experiment runner resolves: it names another pipeline of the experiment.
BUDGET_FROM = "token_budget_from"


class VoteParams(PipelineParams):
    """Parameters of ``vote``."""

    k: int = Field(default=5, ge=1, description="Samples to draw when there is no token budget.")
    temperature: float = Field(default=0.8, ge=0, le=2, description="Sampling temperature of each sample.")
    token_budget: float | None = Field(
        default=None, ge=0,
        description="Keep sampling until this many tokens (prompt + completion) are spent on the "
        "problem, up to max_samples (at least one sample); k is then not used.",
    )
    token_budget_from: str | None = Field(
        default=None,
        description="In an experiment spec: the label of a pipeline listed before this one; "
        "token_budget becomes its measured tokens per problem under the same seed, so vote spends "
        "what it is compared to.",
    )
    max_samples: int = Field(default=20, ge=1, description="Most samples drawn under a token budget.")

    @model_validator(mode="after")
    def _one_budget(self) -> VoteParams:
        if self.token_budget is not None and self.token_budget_from is not None:
            raise ValueError("give token_budget or token_budget_from, not both")
        return self


@register_pipeline("vote", params=VoteParams)
class Vote(dspy.Module):
    """k independent samples (or as many as a token budget buys); the answer is the largest group
    of samples that behave identically on the prompt's visible examples (CodeT-style).

    Parameters: :class:`VoteParams`, as keywords (``Vote(k=5)``); ``token_budget_from`` is the
    experiment runner's to resolve into ``token_budget``.
    """

    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.params = VoteParams.validated("vote", params)
        if self.params.token_budget_from is not None:  # sampling k instead would be silently wrong
            raise UserError(
                f"pipeline 'vote': params.{BUDGET_FROM}: only an experiment run resolves it (from the "
                "pipelines listed before vote); built directly, vote takes token_budget"
            )
        self.coder = dspy.Predict(Coder)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        sampler = SamplerAgent(
            ctx, self.coder, k=self.params.k, temperature=self.params.temperature,
            token_budget=self.params.token_budget, max_samples=self.params.max_samples,
        )
        history = converse(ctx, [sampler, VoterAgent(ctx)], sampler.name)
        verdict = next(m for m in reversed(history) if m.intent == Intent.VERDICT)
        samples = [m.content for m in history if m.intent == Intent.PROPOSAL]
        return dspy.Prediction(
            code=verdict.content, iterations=1, parsed=True, thread_id=ctx.thread_id,
            metrics={"samples": len(samples), "largest_group": verdict.metadata["largest_group"],
                     "messages": len(history)},
            scored_codes={"samples": samples},
        )
