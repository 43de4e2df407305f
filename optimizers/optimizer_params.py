"""Each optimiser's parameters as a typed, documented model (``optimizer.params`` of an
optimisation spec; :class:`~critiquelab.optimizers.compile.CompileConfig` in Python).

Why typed: DSPy's optimisers take keyword arguments, and a dict handed through to them turns a
misspelled name (``max_bootstraped_demos``) into a setting silently ignored — a different
optimisation from the one the researcher wrote down and logged. Here an unknown name, a wrong
type, or a combination the optimiser would ignore or reject is one line naming the parameter
and what is allowed, before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from critiquelab.core.config import StrictModel, explain
from critiquelab.core.errors import UserError

Budget = Literal["light", "medium", "heavy"]


class OptimizerParams(StrictModel):
    """Base of every optimiser's parameters model."""


class TracesParams(OptimizerParams):
    k: int = Field(default=3, ge=1, description="Demos per role, drawn (seeded) from successful pool traces.")


class BootstrapParams(OptimizerParams):
    max_bootstrapped_demos: int = Field(
        default=2, ge=0,
        description="Demos per predictor, from runs whose final code passes the hidden tests.",
    )
    max_rounds: int = Field(default=1, ge=1, description="Attempts per train problem to get a passing run.")


class MiproParams(OptimizerParams):
    auto: Budget | None = Field(
        default="light",
        description="DSPy's preset search budget; null: set num_candidates / num_trials yourself "
        "(the cheap setting for a local model).",
    )
    num_candidates: int | None = Field(
        default=None, ge=1,
        description="Instruction and demo-set candidates; only with auto: null (default 3).",
    )
    num_trials: int | None = Field(
        default=None, ge=1, description="Bayesian-search trials; only with auto: null (default 4).",
    )
    minibatch_size: int | None = Field(
        default=None, ge=1,
        description="Validation problems per trial; only with auto: null (default 35, at most the "
        "validation split).",
    )
    max_bootstrapped_demos: int = Field(default=2, ge=0, description="Demos per predictor candidate set.")
    num_threads: int = Field(default=1, ge=1, description="Parallel evaluations (the local server runs one).")

    @model_validator(mode="after")
    def _budget_is_auto_or_explicit(self) -> MiproParams:
        explicit = [name for name in ("num_candidates", "num_trials", "minibatch_size")
                    if name in self.model_fields_set]
        if self.auto is not None and explicit:
            raise ValueError(
                f"{', '.join(explicit)} only apply with auto: null (auto: {self.auto} sets its own budget)"
            )
        return self


class GepaParams(OptimizerParams):
    auto: Budget | None = Field(
        default=None, description="DSPy's preset budget; or set max_metric_calls (not both).",
    )
    max_metric_calls: int | None = Field(
        default=None, ge=1, description="Metric calls GEPA may spend (default 50 when auto is not set).",
    )
    reflection_minibatch_size: int = Field(
        default=3, ge=1, description="Train problems the reflection LM reads per proposal.",
    )
    num_threads: int = Field(default=1, ge=1, description="Parallel evaluations (the local server runs one).")

    @model_validator(mode="after")
    def _one_budget(self) -> GepaParams:
        if self.auto is not None and self.max_metric_calls is not None:
            raise ValueError("set auto or max_metric_calls, not both")
        return self


OPTIMIZER_PARAMS: dict[str, type[OptimizerParams]] = {
    "traces": TracesParams, "bootstrap": BootstrapParams, "mipro": MiproParams, "gepa": GepaParams,
}
OPTIMIZERS = tuple(OPTIMIZER_PARAMS)


def optimizer_params(optimizer: str, params: Mapping[str, Any] | OptimizerParams) -> OptimizerParams:
    """``params`` as ``optimizer``'s parameters model: a mapping validated (defaults filled in), a
    model of that optimiser's (an optimisation spec holds one, validated when it was read) as it is."""
    if optimizer not in OPTIMIZER_PARAMS:
        raise UserError(f"unknown optimizer '{optimizer}'; one of {', '.join(OPTIMIZERS)}")
    model = OPTIMIZER_PARAMS[optimizer]
    if isinstance(params, OptimizerParams):
        if type(params) is not model:
            raise UserError(f"{optimizer}: expected {model.__name__}, got {type(params).__name__}")
        return params
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        raise UserError(explain(exc, where=f"optimizer '{optimizer}'", model=model, inside="params")) from exc
