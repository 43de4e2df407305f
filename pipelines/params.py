"""Typed pipeline parameters: the pydantic model each pipeline declares for its ``params``.

One model per pipeline is the single source of truth: it checks a spec's ``params`` once, when
the spec is read, and the pipeline is then constructed from that instance (``Debate(params)``);
it is what ``critiquelab pipelines`` lists (name, type, default, allowed values, description).
A bad value is one line naming the field and what is allowed (:func:`critiquelab.core.config.explain`).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Protocol, Self, Union, get_args, get_origin, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from critiquelab.core.config import StrictModel, choices_of, explain
from critiquelab.core.errors import UserError
from critiquelab.runtime.parallel_agents import MAX_PARALLEL_AGENTS

_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


class SchedulingOnly:
    """Marks a field (in its ``Annotated`` type) that changes when or where calls are made, never
    what they ask: a pipeline's :data:`ParallelAgents`, an experiment's executor settings. Such
    fields stay out of checkpoint and cost keys (``marked_fields(model, SCHEDULING_ONLY)``)."""


SCHEDULING_ONLY = SchedulingOnly()


def marked_fields(model: type[BaseModel], marker: object) -> frozenset[str]:
    """The fields of ``model`` whose ``Annotated`` type carries ``marker`` (e.g. :data:`SCHEDULING_ONLY`)."""
    return frozenset(name for name, field in model.model_fields.items() if marker in field.metadata)


class _KeyedWhenSet:
    """Marks a parameter (in its ``Annotated`` type) that is left out of checkpoint and cost keys
    while it holds its default: a parameter added after results were checkpointed under keys
    without it, so those keys — and the runs behind them — stand, and setting it gives a key of
    its own."""


KEYED_WHEN_SET = _KeyedWhenSet()


class PipelineParams(StrictModel):
    """Base of every pipeline's parameter model: strict like every config (:class:`StrictModel`:
    an unknown name or a wrong type is an error, never a default or a conversion). Subclasses give
    every field a ``description`` and its range (``ge``/``le``) or choices (``Literal``); those are
    what ``critiquelab pipelines`` shows.
    """

    model_config = ConfigDict(frozen=True)  # built once from the spec, then shared by every run

    @classmethod
    def validated(cls, pipeline: str, values: Mapping[str, Any]) -> Self:
        """``values`` checked and completed with the defaults; a bad one is a :class:`UserError`
        line such as ``pipeline 'debate': params.debaters: must be >= 2 (got 1)``."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise UserError(explain(exc, where=f"pipeline '{pipeline}'", model=cls, inside="params")) from exc

    @classmethod
    def defaults(cls) -> Self:
        """Every field at its default: a pipeline built without params. (Not ``cls()``: shared
        parameter types carry their default inside ``Annotated``, which pydantic honours and the
        type checker's pydantic plugin does not see.)"""
        return cls.model_validate({})

    def key_values(self) -> dict[str, Any]:
        """What checkpoint and cost keys hash: :meth:`model_dump` without the fields declared
        :data:`ParallelAgents`, which change when role calls are made, never what they ask (tested
        for each pipeline), so runs that differ only in them share their finished problems; and
        without a :data:`KEYED_WHEN_SET` field at its default."""
        fields = type(self).model_fields
        left_out = set(marked_fields(type(self), SCHEDULING_ONLY))
        left_out |= {name for name, field in fields.items()
                     if KEYED_WHEN_SET in field.metadata and getattr(self, name) == field.get_default()}
        return self.model_dump(exclude=left_out)


# Parameters several pipelines take, declared once so that their type, range and default mean
# the same everywhere. A pipeline gives its own default where the shared one is not given or does
# not suit it, and its own ``description`` of what the value does in that pipeline:
# ``max_iterations: MaxIterations = Field(description="Reviews before …")``.

MaxIterations = Annotated[int, Field(default=3, ge=1)]
"""Rounds of review and revision (or versions) a loop runs at most (3 unless the pipeline says)."""

FeedbackTimeout = Annotated[float, Field(
    default=5.0, gt=0, le=600,
    description="Wall-clock limit in seconds for running one version on the visible examples.",
)]
"""Seconds one sandboxed run of the code on examples or tests may take (5 unless the pipeline
says, at most ten minutes: a bound past the clock's range would fail only in the sandbox); the
description is the common one, a pipeline that runs something else says what."""

ParallelAgents = Annotated[int, Field(ge=1, le=MAX_PARALLEL_AGENTS), SCHEDULING_ONLY]
"""Role calls of one problem in flight at once (see :mod:`critiquelab.runtime.parallel_agents`); no
default, since how much of a pipeline can run at once is the pipeline's to say. A model that
declares ``parallel_agents: ParallelAgents`` is a :class:`AgentsInParallel`."""


@runtime_checkable
class AgentsInParallel(Protocol):
    """Params of a pipeline that makes some role calls of one problem at once: a protocol rather
    than a base model, so that each pipeline lists ``parallel_agents`` where it documents it."""

    parallel_agents: int


def agents_in_flight(params: PipelineParams) -> int:
    """Role calls of one problem the pipeline has in flight at once: its ``parallel_agents``, or 1
    for a pipeline that makes its calls one after another."""
    return params.parallel_agents if isinstance(params, AgentsInParallel) else 1

SamplingTemperature = Annotated[float, Field(ge=0, le=2)]
"""The sampling temperature of the role calls a pipeline samples (debaters' proposals, vote's
samples, tree search's children)."""

GeneratedTestCount = Annotated[int, Field(ge=1, le=50)]
"""Asserts a test-writing role is asked for (usable ones are ``assert f(args) == literal``)."""


def describe_params(model: type[PipelineParams]) -> list[dict[str, Any]]:
    """One row per parameter: ``name``, ``type``, ``default`` (the Python value; ``required``
    says there is none), ``allowed`` (range or choices, as text) and ``description``."""
    return [
        {
            "name": name,
            "type": _type_name(field.annotation),
            "default": None if field.is_required() else field.get_default(call_default_factory=True),
            "required": field.is_required(),
            "allowed": _allowed(field),
            "description": field.description or "",
        }
        for name, field in model.model_fields.items()
    ]


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return " | ".join(sorted({type(choice).__name__ for choice in get_args(annotation)}))
    if get_origin(annotation) is list:
        return f"list[{_type_name(get_args(annotation)[0])}]"
    if get_origin(annotation) in (Union, types.UnionType):
        return " | ".join(_type_name(member) for member in get_args(annotation))
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _allowed(field: FieldInfo) -> str:
    choices = choices_of(field.annotation)
    if choices:
        return ", ".join(map(str, choices))
    bounds = [
        f"{symbol} {getattr(constraint, key)}"
        for constraint in field.metadata for key, symbol in _BOUNDS if hasattr(constraint, key)
    ]
    return ", ".join(bounds)
