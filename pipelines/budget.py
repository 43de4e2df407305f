"""Equal-compute comparisons: a pipeline that can spend a token budget per problem.

A pipeline whose params model derives from :class:`TokenBudgetParams` takes ``token_budget``
(tokens, prompt + completion, per problem) or, in an experiment spec, ``token_budget_from: LABEL``
— the label of a pipeline listed before it, whose measured tokens per problem under the same seed
become the budget. Only the experiment runner can resolve that label, so a pipeline built directly
with it is refused (:func:`require_resolved`) rather than silently running without a budget.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, model_validator

from critiquelab.core.errors import UserError
from critiquelab.pipelines.params import PipelineParams


class TokenBudgetParams(PipelineParams):
    """``token_budget`` / ``token_budget_from`` for pipelines that spend a budget per problem."""

    token_budget: float | None = Field(
        default=None, ge=0,
        description="Tokens (prompt + completion) this pipeline may spend on one problem; "
        "what happens at the limit is the pipeline's to say.",
    )
    token_budget_from: str | None = Field(
        default=None,
        description="In an experiment spec: the label of a pipeline listed before this one; "
        "token_budget becomes its measured tokens per problem under the same seed, so this "
        "pipeline spends what it is compared to.",
    )

    @model_validator(mode="after")
    def _one_budget(self) -> TokenBudgetParams:
        if self.token_budget is not None and self.token_budget_from is not None:
            raise ValueError("give token_budget or token_budget_from, not both")
        return self

    def with_measured_budget(self, tokens: float) -> Self:
        """These params once the pipeline ``token_budget_from`` names has run: its measured
        ``tokens`` per problem are the ``token_budget``, and no label is left to resolve."""
        return self.model_copy(update={"token_budget": tokens, "token_budget_from": None})

    def running_values(self) -> dict[str, Any]:
        """The values the pipeline runs with once :meth:`with_measured_budget` resolved its
        budget: all but ``token_budget_from``, a label that has served its purpose."""
        return self.model_dump(exclude={"token_budget_from"})


def budget_source(params: PipelineParams) -> str | None:
    """The label ``token_budget_from`` names, for a pipeline that takes a budget and was given one."""
    return params.token_budget_from if isinstance(params, TokenBudgetParams) else None


def token_budget(params: PipelineParams) -> float | None:
    """The pipeline's ``token_budget``; None when it has none or takes none."""
    return params.token_budget if isinstance(params, TokenBudgetParams) else None


def require_resolved(pipeline: str, params: TokenBudgetParams) -> None:
    """Refuse ``token_budget_from`` outside an experiment run: ignoring it would be silently wrong."""
    if params.token_budget_from is not None:
        raise UserError(
            f"pipeline '{pipeline}': params.token_budget_from: only an experiment run resolves it (from "
            f"the pipelines listed before {pipeline}); built directly, {pipeline} takes token_budget"
        )
