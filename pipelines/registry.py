"""Pipelines registered by name, so YAML specs, the CLI and MLflow params can name them.

Every pipeline declares its parameters and its per-problem figures as typed models beside it
and registers them. A new pipeline copies this pattern (see
:mod:`critiquelab.pipelines.critic_loop.pipeline`)::

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

Decorating only marks the class: a pipeline is *found* through the entry-point group
:data:`ENTRY_POINTS` (``critiquelab.pipelines``; critiquelab's own are listed in its pyproject as
another package lists its own, ``reflexion = "critiquelab.pipelines.reflexion:Reflexion"``), or named where
it is by a spec (``package.module:Name``, ``path/to/file.py:Name``). The installed ones are read
once per process, at the first lookup (:func:`rescan` reads them again); a plugin that fails to
import, or a name two pipelines take, is one :class:`UserError` line. Nothing is registered at
import time, and there is no registry object but the cached lookups.

Every field has a ``description`` and its range (``ge``/``le``/``gt``) or choices (``Literal``);
defaults live only in the model. The model checks a spec's ``params`` once, when the spec is
parsed (before anything runs or is written), and the runner builds the pipeline from that instance
(:func:`build_pipeline`); ``critiquelab pipelines`` lists the fields with their types, defaults and
descriptions. A pipeline never validates again in ``__init__``.

From Python (a notebook): ``Reflexion()`` runs with the defaults, ``Reflexion(ReflexionParams(
max_trials=2))`` with the model pydantic checked (a bad value is its ``ValidationError``), and
``create_pipeline("reflexion", max_trials=2)`` checks raw values once, a bad one being the same
one line a spec gets.

The outcome model (:mod:`critiquelab.pipelines.outcomes`) declares every figure ``forward`` reports: building
it with an undeclared figure or a wrong type fails, and the figure groups it inherits say which
run metrics (:meth:`~critiquelab.pipelines.outcomes.Outcome.run_metrics`) and comparison columns
(:meth:`~critiquelab.pipelines.outcomes.Outcome.table_metrics`) its results summarise into.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import dspy

from critiquelab.core.errors import UserError
from critiquelab.core.plugins import Loaded, entry_point_objects, is_reference, load_reference
from critiquelab.pipelines.outcomes import Outcome
from critiquelab.pipelines.params import PipelineParams, describe_params
from critiquelab.pipelines.roles import RoleDeclaration, RoleMap, declare_roles, undeclared_roles

PipelineFactory = Callable[..., dspy.Module]
F = TypeVar("F", bound=PipelineFactory)


@dataclass(frozen=True)
class _Registered:
    factory: PipelineFactory
    params: type[PipelineParams]
    outcome: type[Outcome]
    roles: RoleMap


# The entry-point group every pipeline is installed under, critiquelab's own included (its
# pyproject lists them): one mechanism, so a plugin is found exactly as a built-in is.
ENTRY_POINTS = "critiquelab.pipelines"
# The attribute ``register_pipeline`` leaves on the class it decorates: ``(name, _Registered)``.
# Read from the class's own __dict__, so a subclass that is not registered itself is no pipeline.
_MARK = "__critiquelab_pipeline__"


def register_pipeline(
    name: str, *, params: type[PipelineParams], outcome: type[Outcome], roles: RoleDeclaration = ()
) -> Callable[[F], F]:
    """Class decorator: make a ``dspy.Module`` subclass constructible by ``name``, its
    parameters described and checked by the model ``params``, its ``forward`` returning an
    ``outcome`` (a :class:`~critiquelab.pipelines.outcomes.Outcome` subclass: its per-problem figures).
    ``roles``: the role names its calls are made and reported as (``role.NAME.*`` metrics),
    which an experiment may give their own model or temperature, each with the predictors that
    serve it (``{"coder": "proposer", …}``; see :mod:`critiquelab.pipelines.roles`): the one declaration the
    optimisers, export and ``run --prompts`` read too."""
    declared = declare_roles(name, roles)
    if not (isinstance(outcome, type) and issubclass(outcome, Outcome)):
        raise TypeError(f"pipeline '{name}': outcome must be an Outcome model, got {outcome!r}")

    def decorate(factory: F) -> F:
        # Only marked: the registry reads the mark where the class is installed or referenced
        # (see _installed), so importing a module registers nothing anywhere.
        setattr(factory, _MARK, (name, _Registered(factory, params, outcome, declared)))
        return factory

    return decorate


def _marked(value: Any) -> tuple[str, _Registered] | None:
    mark = getattr(value, "__dict__", {}).get(_MARK)
    return mark if isinstance(mark, tuple) else None


@functools.cache
def _installed() -> dict[str, _Registered]:
    """Every pipeline installed under :data:`ENTRY_POINTS`, loaded on the first lookup and kept
    for the process. An entry point that fails to import, points to no registered pipeline, or
    whose name is not its pipeline's, and a name two pipelines take, are one UserError line."""
    found: dict[str, tuple[_Registered, Loaded]] = {}
    for loaded in entry_point_objects(ENTRY_POINTS):
        mark = _marked(loaded.value)
        if mark is None:
            raise UserError(f"{loaded.source}: not a pipeline (a class decorated with @register_pipeline)")
        name, registered = mark
        if name != loaded.name:
            raise UserError(f"{loaded.source}: registers pipeline '{name}'; name the entry point '{name}'")
        if name in found and found[name][0].factory is not registered.factory:
            raise UserError(f"pipeline '{name}' is registered twice: by {found[name][1].source} and by "
                            f"{loaded.source}; uninstall or rename one")
        found[name] = (registered, loaded)
    if not any(loaded.distribution == "critiquelab" for _, loaded in found.values()):
        raise UserError("critiquelab's own pipelines are not installed (no entry points of group "
                        f"{ENTRY_POINTS}): reinstall it, e.g. pip install -e .")
    return {name: registered for name, (registered, _) in found.items()}


@functools.cache
def _referenced(reference: str) -> tuple[str, _Registered]:
    """The pipeline ``module:Name`` or ``file.py:Name`` names: the one its module registers as
    ``Name``, or its class ``Name``. Its registered name may not be an installed pipeline's."""
    module, wanted = load_reference(reference, "pipeline")
    marks = [mark for value in vars(module).values() if (mark := _marked(value)) is not None]
    chosen = [(n, r) for n, r in marks if wanted in (n, getattr(r.factory, "__name__", None))]
    if not chosen:
        names = ", ".join(sorted({n for n, _ in marks})) or "none"
        raise UserError(f"pipeline '{reference}': {module.__name__} registers no pipeline named or "
                        f"defined as '{wanted}' (it registers: {names})")
    name, registered = chosen[0]
    installed = _installed().get(name)
    if installed is not None and installed.factory is not registered.factory:
        raise UserError(f"pipeline '{reference}' registers the name '{name}', which an installed "
                        "pipeline has; rename it")
    return name, registered


def _registered(name: str) -> _Registered:
    if is_reference(name):
        return _referenced(name)[1]
    installed = _installed()
    if name not in installed:
        raise UserError(f"unknown pipeline '{name}'; registered: {', '.join(sorted(installed))} "
                        "(or name one as package.module:Name or path/to/file.py:Name)")
    return installed[name]


def pipeline_names() -> list[str]:
    """The installed pipelines' names (critiquelab's and every plugin's)."""
    return sorted(_installed())


def rescan() -> None:
    """Look for installed pipelines again on the next lookup: after ``pip install``-ing a plugin
    into a running process (a notebook), whose pipelines were read once, at the first lookup."""
    _installed.cache_clear()
    _referenced.cache_clear()


def is_pipeline(name: str) -> bool:
    """Whether ``name`` (a registered name or a reference) names a pipeline here: a run's
    recorded name read later (compare, rescore) that does not is shown with the columns every
    pipeline has. A broken installed plugin is still the error it is everywhere."""
    installed = _installed()
    if not is_reference(name):
        return name in installed
    try:
        _referenced(name)
    except UserError:  # a module or file that no longer loads here
        return False
    return True


def registered_name(name: str) -> str:
    """The name pipeline ``name`` registered itself under: ``name`` itself, or for a reference
    (``module:Name``) the name its module gave it — a spec entry's default label."""
    if is_reference(name):
        return _referenced(name)[0]
    _registered(name)  # an unknown name: the same one line as everywhere
    return name


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
    mark = getattr(type(program), _MARK, None)
    if isinstance(mark, tuple) and isinstance(mark[1], _Registered):
        return mark[1].roles
    return undeclared_roles(program)


def pipeline_source(name: str) -> Path | None:
    """The file defining pipeline ``name`` (None where Python cannot say): what a checkpoint of a
    plugin's pipeline is keyed on, as the project's own code is on its fingerprint."""
    source = inspect.getsourcefile(_registered(name).factory)
    return Path(source).resolve() if source else None


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


def describe_pipelines(names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every installed pipeline, or only ``names`` (registered names or references, in that
    order; an unknown one is a one-line UserError): ``name``, ``summary`` (its docstring's first
    paragraph), ``params`` (:func:`critiquelab.pipelines.params.describe_params` of its model), ``roles`` and
    ``figures`` (the per-problem figures its outcome model declares)."""
    chosen = [(name, _registered(name)) for name in names] if names else sorted(_installed().items())
    return [
        {
            "name": name,
            "summary": " ".join((inspect.getdoc(registered.factory) or "").partition("\n\n")[0].split()),
            "params": describe_params(registered.params),
            "roles": list(registered.roles.names),
            "predictors": registered.roles.predictor_names(),
            "figures": [name for name, field in registered.outcome.model_fields.items() if not field.exclude],
        }
        for name, registered in chosen
    ]
