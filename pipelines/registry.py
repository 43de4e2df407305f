"""Pipelines registered by name, so YAML specs, the CLI and MLflow params can name them.

Every pipeline declares its parameters and its per-problem figures as typed models beside it
and registers them. A new pipeline copies this pattern (see :mod:`pipelines.critic_loop.pipeline`)::

    class ReflexionParams(PipelineParams):
        \"\"\"Parameters of ``reflexion``.\"\"\"

        max_trials: int = Field(default=3, ge=1, description="Attempts per problem.")
        memory: Literal["episodic", "none"] = Field(default="episodic", description="...")


    class ReflexionOutcome(ThreadOutcome):
        \"\"\"Figures of ``reflexion``.\"\"\"

        trials: int = Field(description="Attempts made.")


    @register_pipeline("reflexion", params=ReflexionParams, outcome=ReflexionOutcome)
    class Reflexion(dspy.Module):
        \"\"\"What it does, in a sentence: ``critiquelab pipelines`` shows this paragraph.\"\"\"

        def __init__(self, params: ReflexionParams | None = None) -> None:
            super().__init__()
            self.params = params if params is not None else ReflexionParams.defaults()

        def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
            ...
            return dspy.Prediction(code=final, outcome=ReflexionOutcome(trials=..., ...))

Every field has a ``description`` and its range (``ge``/``le``/``gt``) or choices (``Literal``);
defaults live only in the model. The model checks a spec's ``params`` once, when the spec is
parsed (before anything runs or is written), and the runner builds the pipeline from that instance
(:func:`build_pipeline`); ``critiquelab pipelines`` lists the fields with their types, defaults and
descriptions. A pipeline never validates again in ``__init__``.

From Python (a notebook): ``Reflexion()`` runs with the defaults, ``Reflexion(ReflexionParams(
max_trials=2))`` with the model pydantic checked (a bad value is its ``ValidationError``), and
``create_pipeline("reflexion", max_trials=2)`` checks raw values once, a bad one being the same
one line a spec gets.

The outcome model (:mod:`pipelines.outcomes`) declares every figure ``forward`` reports: building
it with an undeclared figure or a wrong type fails, and the figure groups it inherits say which
run metrics (:meth:`~pipelines.outcomes.Outcome.run_metrics`) and comparison columns
(:meth:`~pipelines.outcomes.Outcome.table_metrics`) its results summarise into.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import dspy

from core.errors import UserError
from pipelines.outcomes import Outcome
from pipelines.params import PipelineParams, describe_params
from pipelines.roles import RoleDeclaration, RoleMap, declare_roles, undeclared_roles

PipelineFactory = Callable[..., dspy.Module]
F = TypeVar("F", bound=PipelineFactory)


@dataclass(frozen=True)
class _Registered:
    factory: PipelineFactory
    params: type[PipelineParams]
    outcome: type[Outcome]
    roles: RoleMap


_REGISTRY: dict[str, _Registered] = {}
# Modules whose import registers the built-in pipelines; loaded on first lookup, not at import.
_BUILTIN_MODULES = (
    "pipelines.baseline", "pipelines.self_refine", "pipelines.reflexion",
    "pipelines.critic_loop.pipeline", "pipelines.debate.pipeline", "pipelines.vote.pipeline",
    "pipelines.tree_search.pipeline", "pipelines.scratchpad_team.pipeline", "pipelines.architect.pipeline",
    "pipelines.sop.pipeline", "pipelines.role_play.pipeline", "pipelines.distinguish.pipeline",
)


def register_pipeline(
    name: str, *, params: type[PipelineParams], outcome: type[Outcome], roles: RoleDeclaration = ()
) -> Callable[[F], F]:
    """Class decorator: make a ``dspy.Module`` subclass constructible by ``name``, its
    parameters described and checked by the model ``params``, its ``forward`` returning an
    ``outcome`` (a :class:`~pipelines.outcomes.Outcome` subclass: its per-problem figures).
    ``roles``: the role names its calls are made and reported as (``role.NAME.*`` metrics),
    which an experiment may give their own model or temperature, each with the predictors that
    serve it (``{"coder": "proposer", …}``; see :mod:`pipelines.roles`): the one declaration the
    optimisers, export and ``run --prompts`` read too."""
    declared = declare_roles(name, roles)
    if not (isinstance(outcome, type) and issubclass(outcome, Outcome)):
        raise TypeError(f"pipeline '{name}': outcome must be an Outcome model, got {outcome!r}")

    def decorate(factory: F) -> F:
        known = _REGISTRY.get(name)
        if known is not None and known.factory is not factory:
            raise ValueError(f"pipeline name '{name}' is already registered")
        _REGISTRY[name] = _Registered(factory, params, outcome, declared)
        return factory

    return decorate


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def _registered(name: str) -> _Registered:
    _load_builtins()
    if name not in _REGISTRY:
        raise UserError(f"unknown pipeline '{name}'; registered: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def pipeline_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def params_model(name: str) -> type[PipelineParams]:
    """The params model pipeline ``name`` declares; an unknown name is a one-line :class:`UserError`."""
    return _registered(name).params


def validate_params(name: str, values: Mapping[str, Any]) -> PipelineParams:
    """``values`` of pipeline ``name`` checked and completed with defaults, without building
    the pipeline; an unknown name or a bad value is a one-line :class:`UserError`."""
    return params_model(name).validated(name, values)


def pipeline_roles(name: str) -> tuple[str, ...]:
    """The roles of pipeline ``name`` that can be given their own model or temperature."""
    return _registered(name).roles.names


def role_map(name: str) -> RoleMap:
    """Pipeline ``name``'s declared roles and the predictors serving each."""
    return _registered(name).roles


def program_roles(program: Any) -> RoleMap:
    """The roles of ``program``: its registered pipeline's declaration, or, for a module no
    registration describes, one role per predictor named after its attribute."""
    _load_builtins()
    registered = next((r for r in _REGISTRY.values() if r.factory is type(program)), None)
    return registered.roles if registered is not None else undeclared_roles(program)


def outcome_model(name: str) -> type[Outcome]:
    """The model of pipeline ``name``'s per-problem figures, and how they summarise."""
    return _registered(name).outcome


def build_pipeline(name: str, params: PipelineParams) -> dspy.Module:
    """Pipeline ``name`` constructed from its params model, already checked (a spec's): nothing
    is validated again."""
    registered = _registered(name)
    if type(params) is not registered.params:  # a caller's mistake, not a user's
        raise TypeError(f"pipeline '{name}' takes {registered.params.__name__}, got {type(params).__name__}")
    return registered.factory(params)


def create_pipeline(name: str, **values: Any) -> dspy.Module:
    """The convenience for raw values (a notebook, an export's manifest): checked once, then built;
    an unknown name or a bad value is a one-line :class:`UserError`."""
    return build_pipeline(name, validate_params(name, values))


def describe_pipelines() -> list[dict[str, Any]]:
    """Every registered pipeline: ``name``, ``summary`` (its docstring's first paragraph),
    ``params`` (:func:`pipelines.params.describe_params` of its model), ``roles`` and ``figures``
    (the per-problem figures its outcome model declares)."""
    _load_builtins()
    return [
        {
            "name": name,
            "summary": " ".join((inspect.getdoc(registered.factory) or "").partition("\n\n")[0].split()),
            "params": describe_params(registered.params),
            "roles": list(registered.roles.names),
            "predictors": registered.roles.predictor_names(),
            "figures": [name for name, field in registered.outcome.model_fields.items() if not field.exclude],
        }
        for name, registered in sorted(_REGISTRY.items())
    ]
