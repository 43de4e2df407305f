"""The one strict base of every configuration model, and the one line a user reads when a value
in it is wrong.

A configuration is anything a researcher writes down for a run: an experiment or optimisation
spec and its sections, a pipeline's params, memory settings, an optimiser's parameters, a split.
Each is a :class:`StrictModel`; each place that checks one turns pydantic's ``ValidationError``
into a line with :func:`explain` (the CLI prints it and exits 2).
"""

from __future__ import annotations

import reprlib
import types
from collections.abc import Mapping
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from critiquelab.core.yaml_numbers import NUMBER_TYPE_ERRORS, number_as_text_hint


class StrictModel(BaseModel):
    """Base of every configuration model.

    - ``extra="forbid"``: an unknown name is an error — a misspelled setting must never fall back
      silently to its default and run another experiment than the one written down.
    - ``strict=True``: values are taken as written — ``"3"`` is no integer, ``1`` no boolean — so
      YAML's quoting or a wrong type is reported instead of converted.
    - ``allow_inf_nan=False``: ``.inf`` and ``.nan`` are YAML numbers, never a meaningful setting.

    A model that is immutable once checked (a pipeline's params, memory settings) adds
    ``model_config = ConfigDict(frozen=True)``; pydantic merges it with this one. The typed
    figures a pipeline measures (:class:`critiquelab.pipelines.outcomes.Figures`) are strict models too, and
    take back ``allow_inf_nan``: a measured ratio may be NaN.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# Type errors of strict fields, as a spec's reader would say them.
_EXPECTED = {
    "int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
    "string_type": "a string", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "finite_number": "a finite number",
}
_BOUNDS = {
    "greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="), "less_than": ("lt", "<"),
}


def explain(error: ValidationError, *, where: str, model: type[BaseModel], inside: str = "") -> str:
    """One line for ``error`` (raised validating ``model``): ``WHERE: PATH: PROBLEM``, plus a count
    of the other problems. ``inside`` is the path of ``model`` in what the user wrote (``params``).

    An unknown field is reported first: a misspelled key also leaves its field missing, and the
    key is what to fix. A problem of the whole model (a rule across fields) is at ``inside``, or
    at the ``(top level)``."""
    problems = error.errors()
    first = next((p for p in problems if p["type"] == "extra_forbidden"), problems[0])
    path = ".".join([inside] * bool(inside) + [_path_part(part) for part in first["loc"]]) or "(top level)"
    more = len(problems) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{where}: {path}: {describe(first, model)}{suffix}"


def describe(problem: ErrorDetails, model: type[BaseModel] | None = None, *, show_input: bool = True) -> str:
    """What is wrong with one problem's value and what is allowed (``model``, where given, names
    the allowed fields and choices); ``show_input=False`` where the line shows the value already."""
    kind = problem["type"]
    got = f" (got {as_written(problem.get('input'))})" if show_input else ""
    if kind == "extra_forbidden":
        owner = _model(_annotation_at(model, problem["loc"][:-1])) if model else None
        if owner is None:
            return "unknown field (check its spelling)"
        return f"unknown field; allowed: {', '.join(owner.model_fields) or 'none, it takes no fields'}"
    if kind in _BOUNDS:
        key, symbol = _BOUNDS[kind]
        return f"must be {symbol} {problem['ctx'][key]}{got}"
    if kind == "literal_error":
        choices = choices_of(_annotation_at(model, problem["loc"])) if model else ()
        allowed = ", ".join(map(str, choices)) if choices else problem["ctx"]["expected"]
        return f"must be one of {allowed}{got}"
    if kind in _EXPECTED:  # strict: a value of another type is refused, never converted
        if not show_input:
            return f"expected {_EXPECTED[kind]}"
        hint = number_as_text_hint(problem.get("input")) if kind in NUMBER_TYPE_ERRORS else ""
        return f"expected {_EXPECTED[kind]}, got {as_written(problem.get('input'))}{hint}"
    if kind == "missing":
        return "required (it has no default)"
    if kind == "string_too_short" and problem["ctx"].get("min_length") == 1:
        return "must not be empty (leave the field out for its default)"
    if kind == "value_error":  # a model's own check: its message says it all
        return " ".join(str(problem["ctx"]["error"]).split())
    return " ".join(str(problem["msg"]).split())  # a value's own line breaks must not split the line


def as_written(value: object) -> str:
    """A value as YAML writes it (strings quoted, so '0.5' reads as text), shortened: a message is
    one line, whatever was written (a list that YAML aliases expand to millions of items too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 2, 80, 80
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = 4
    return short.repr(value)


def choices_of(annotation: object) -> tuple[object, ...]:
    """The values a ``Literal`` field (or a list of one, e.g. critic_loop's critics) allows; ``()``
    for any other type."""
    annotation = _unwrapped(annotation)
    if get_origin(annotation) is list:
        return choices_of(get_args(annotation)[0])
    return get_args(annotation) if get_origin(annotation) is Literal else ()


def _path_part(part: int | str) -> str:
    """A field path element as written, or quoted when it is not a plain name (a key holding a
    line break or spaces must neither split the line nor read as two fields)."""
    text = str(part)
    return text if text.replace("_", "a").replace("-", "a").isalnum() else repr(text)


def _unwrapped(annotation: object) -> object:
    """``X`` of ``Annotated[X, …]`` and of ``X | None``; any other type as it is."""
    if get_origin(annotation) is Annotated:
        return _unwrapped(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        members = [m for m in get_args(annotation) if m is not type(None)]
        return _unwrapped(members[0]) if len(members) == 1 else annotation
    return annotation


def _model(annotation: object) -> type[BaseModel] | None:
    inner = _unwrapped(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _annotation_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> object:
    """The declared type at ``loc`` inside ``model`` (``None`` where the path leaves what is
    declared: a union of models, a value a validator builds)."""
    annotation: object = model
    for part in loc:
        inner = _unwrapped(annotation)
        owner, origin = _model(inner), get_origin(inner)
        if owner is not None:
            field = owner.model_fields.get(str(part))
            annotation = field.annotation if field else None
        elif origin in (list, tuple, set, frozenset) and isinstance(part, int):
            annotation = get_args(inner)[0] if get_args(inner) else None
        elif origin in (dict, Mapping) and len(get_args(inner)) == 2:
            annotation = get_args(inner)[1]
        else:
            return None
    return annotation
