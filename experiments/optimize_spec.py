"""Optimisation specs (``critiquelab optimize SPEC.yaml``), validated like experiment specs:
unknown keys are errors, and every problem is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from eval.errors import UserError
from experiments.spec import (
    DatasetSpec,
    ExecutionSpec,
    ModelSpec,
    PipelineSpec,
    _Strict,
    format_validation_error,
    load_yaml,
)
from optimizers.splits import SplitSpec


class OptimizerSpec(_Strict):
    name: Literal["traces", "bootstrap", "mipro", "gepa"] = Field(
        default="bootstrap",
        description="traces: demos from successful pool traces; bootstrap: BootstrapFewShot; "
        "mipro: MIPROv2; gepa: GEPA with sandbox feedback.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Optimiser parameters, e.g. max_bootstrapped_demos, auto (light/medium/heavy), "
        "max_metric_calls, k (demos per role for 'traces').",
    )


class TraceSource(_Strict):
    run_ids: list[str] = Field(default_factory=list, description="Finished child runs to learn from.")
    experiment: str | None = Field(default=None, description="…or every finished child run of it.")


class RefineSpec(_Strict):
    role: str = Field(default="coder", description="The role whose instruction TextGrad refines.")
    steps: int = Field(default=2, ge=1, description="TextGrad steps over the train split.")
    batch_size: int | None = Field(
        default=4, ge=1, description="Train problems per step (a seeded minibatch); null: all of them.",
    )
    model: ModelSpec | None = Field(
        default=None, description="TextGrad engine (evaluation, gradients, updates); default: the "
        "teacher, else the task model.",
    )


class OptimizeSpec(_Strict):
    name: str = Field(min_length=1, description="MLflow experiment name of the optimisation.")
    description: str = ""
    pipeline: PipelineSpec
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    split: SplitSpec = Field(default_factory=SplitSpec)
    dataset: DatasetSpec = Field(default_factory=DatasetSpec)
    model: ModelSpec = Field(default_factory=ModelSpec, description="The task model.")
    teacher: ModelSpec | None = Field(
        default=None,
        description="Teacher / prompt / reflection model (e.g. local-1.5b); default: the task model.",
    )
    traces: TraceSource = Field(
        default_factory=TraceSource,
        description="Where 'traces' finds pool traces; with none, the pipeline runs on the train "
        "split first and its own traces are used.",
    )
    refine: RefineSpec | None = Field(
        default=None,
        description="After the gate, refine one role's instruction of the kept program with TextGrad "
        "(kept only if validation does not drop).",
    )
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)


def load_optimize_spec(path: Path) -> OptimizeSpec:
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of fields at the top level")
    try:
        return OptimizeSpec.model_validate(data)
    except ValidationError as exc:
        raise UserError(format_validation_error(exc, str(path))) from exc
