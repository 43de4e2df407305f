"""Optimisation specs (``critiquelab optimize SPEC.yaml``), validated like experiment specs:
unknown keys are errors, and every problem is one line naming the file and the field.

Settings that would be silently ignored are errors too: an optimiser parameter the chosen
optimiser does not take, trace sources for an optimiser that reads no traces, a teacher nothing
uses. What needs the pipeline or the models (the role to refine) is :func:`check_spec`, and the
split sizes need the dataset: :func:`critiquelab.experiments.optimize.loop.run_optimization` runs both before
it writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializeAsAny, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from critiquelab.core.config import StrictModel, explain
from critiquelab.core.errors import UserError
from critiquelab.experiments.controls import optimisation_refusal
from critiquelab.experiments.spec.execution import ExecutionSpec
from critiquelab.experiments.spec.experiment import DatasetSpec, ModelSpec
from critiquelab.experiments.spec.files import load_yaml
from critiquelab.experiments.spec.pipeline_spec import PipelineSpec, anchored_entry
from critiquelab.experiments.spec.stores import TrackingSpec
from critiquelab.experiments.spec.strict import PrintableName
from critiquelab.optimizers.optimizer_params import OptimizerParams, optimizer_params
from critiquelab.optimizers.splits import SplitSpec


def _spec_error(problem: str) -> PydanticCustomError:
    """A validation error whose message is exactly ``problem`` (no "Value error, " prefix)."""
    return PydanticCustomError("optimize_spec", "{problem}", {"problem": problem})


class OptimizerSpec(StrictModel):
    name: Literal["traces", "bootstrap", "mipro", "gepa"] = Field(
        default="bootstrap",
        description="traces: demos from successful pool traces; bootstrap: BootstrapFewShot; "
        "mipro: MIPROv2; gepa: GEPA with sandbox feedback.",
    )
    # Always given (validate_default): the validator below puts the optimiser's own model here, its
    # defaults if the spec has no params. SerializeAsAny: dumped as that model, every field.
    params: SerializeAsAny[OptimizerParams] = Field(
        default_factory=OptimizerParams, validate_default=True,
        description="The optimiser's parameters, checked against its own documented set "
        "(optimizers/optimizer_params.py): traces: k; bootstrap: max_bootstrapped_demos, max_rounds; "
        "mipro: auto, num_candidates, num_trials, minibatch_size, max_bootstrapped_demos, num_threads; "
        "gepa: auto, max_metric_calls, reflection_minibatch_size, num_threads.",
    )
    roles: list[str] | None = Field(
        default=None, min_length=1,
        description="The roles whose prompts (demos, instructions) the optimiser may change, e.g. "
        "[repairer, scorer] of tree_search; the pipeline's other roles keep their own. Each must be a "
        "role of the pipeline. Default: every role.",
    )

    @field_validator("params", mode="before")
    @classmethod
    def _params_of_this_optimizer(cls, params: Any, info: ValidationInfo) -> Any:
        """``params`` become the model of the optimiser ``name`` names: the one validation they get."""
        if "name" not in info.data:  # the name is wrong, and that is the error reported
            return OptimizerParams()
        if type(params) is OptimizerParams:  # the default: none given
            params = {}
        if not isinstance(params, Mapping | OptimizerParams):
            raise PydanticCustomError("dict_type", "Input should be a valid dictionary")
        try:
            return optimizer_params(info.data["name"], params)
        except UserError as exc:
            raise _spec_error(str(exc)) from exc


class TraceSource(StrictModel):
    run_ids: list[str] = Field(default_factory=list, description="Finished child runs to learn from.")
    experiment: str | None = Field(default=None, description="…or every finished child run of it.")

    @field_validator("run_ids")
    @classmethod
    def _each_run_once(cls, run_ids: list[str]) -> list[str]:
        repeated = sorted({r for r in run_ids if run_ids.count(r) > 1})
        if repeated:  # its examples would count twice
            raise PydanticCustomError("repeated_run_ids", "run '{run}' given more than once",
                                      {"run": repeated[0]})
        return run_ids


class RefineSpec(StrictModel):
    role: str = Field(default="coder", description="The role whose instruction TextGrad refines.")
    steps: int = Field(default=2, ge=1, description="TextGrad steps over the train split.")
    batch_size: int | None = Field(
        default=4, ge=1, description="Train problems per step (a seeded minibatch); null: all of them.",
    )
    model: ModelSpec | None = Field(
        default=None, description="TextGrad engine (evaluation, gradients, updates); default: the "
        "teacher, else the task model.",
    )


class OptimizeSpec(StrictModel):
    name: PrintableName = Field(description="MLflow experiment name of the optimisation.")
    description: str = ""
    pipeline: PipelineSpec
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    split: SplitSpec = Field(default_factory=SplitSpec)
    dataset: DatasetSpec = Field(default_factory=DatasetSpec)
    model: ModelSpec = Field(default_factory=ModelSpec, description="The task model.")
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
    # After optimizer and refine, so its check can see both.
    teacher: ModelSpec | None = Field(
        default=None,
        description="Teacher / prompt / reflection model (e.g. local-1.5b) of bootstrap, mipro and "
        "gepa, and refine's default engine; default: the task model.",
    )
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)

    @field_validator("pipeline")
    @classmethod
    def _no_control(cls, pipeline: PipelineSpec) -> PipelineSpec:
        refusal = optimisation_refusal(pipeline.name, pipeline.params)  # see critiquelab.experiments.controls
        if refusal:
            raise _spec_error(refusal)
        return pipeline

    @field_validator("traces")
    @classmethod
    def _traces_only_for_traces(cls, traces: TraceSource, info: ValidationInfo) -> TraceSource:
        optimizer = info.data.get("optimizer")
        if optimizer is not None and optimizer.name != "traces" and (traces.run_ids or traces.experiment):
            raise _spec_error(f"only the 'traces' optimizer reads pool traces; this one is "
                              f"'{optimizer.name}'")
        return traces

    @field_validator("teacher")
    @classmethod
    def _teacher_is_used(cls, teacher: ModelSpec | None, info: ValidationInfo) -> ModelSpec | None:
        if teacher is None or not {"optimizer", "refine"} <= set(info.data):  # else those are the errors
            return teacher
        optimizer, refine = info.data["optimizer"], info.data["refine"]
        if optimizer.name == "traces" and (refine is None or refine.model is not None):
            raise _spec_error("unused: the 'traces' optimizer makes no LM call, and no refine step takes "
                              "the teacher as its engine")
        return teacher


def load_optimize_spec(path: Path) -> OptimizeSpec:
    data = load_yaml(path)
    if isinstance(data, dict) and "pipeline" in data:  # a file pipeline (my_pipes.py:Name): beside the spec
        data = {**data, "pipeline": anchored_entry(data["pipeline"], path.parent)}
    return parse_optimize_spec(data, str(path))


def parse_optimize_spec(data: Any, source: str) -> OptimizeSpec:
    """``data`` (a spec file's YAML) as an :class:`OptimizeSpec`; any problem is one
    :class:`UserError` line naming ``source`` and the field."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of fields at the top level")
    try:
        return OptimizeSpec.model_validate(data)
    except ValidationError as exc:
        raise UserError(explain(exc, where=source, model=OptimizeSpec)) from exc


def check_spec(spec: OptimizeSpec) -> None:
    """What the spec's fields cannot check alone, before the dataset is read or anything is
    written: the pipeline builds, the roles to optimise and to refine are among its roles, each
    model is a model."""
    from critiquelab.experiments.serving.model_files import resolve_bundled
    from critiquelab.experiments.serving.provision import resolve_model
    from critiquelab.optimizers.refine import program_roles
    from critiquelab.pipelines.registry import build_pipeline

    program = build_pipeline(spec.pipeline.name, spec.pipeline.params)
    roles = program_roles(program)
    for role in spec.optimizer.roles or ():
        if role not in roles:
            raise UserError(f"optimizer.roles: '{role}' is not a role of pipeline '{spec.pipeline.name}'; "
                            f"its roles: {', '.join(roles)}")
    if spec.refine is not None and spec.refine.role not in roles:
        raise UserError(f"refine.role: '{spec.refine.role}' is not a role of pipeline "
                        f"'{spec.pipeline.name}'; its roles: {', '.join(roles)}")
    models = {"model": spec.model, "teacher": spec.teacher,
              "refine.model": spec.refine.model if spec.refine is not None else None}
    for where, model in models.items():
        if model is not None and resolve_bundled(model.id) is None:  # a bundled one is fetched when used
            try:
                resolve_model(model)
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from exc
