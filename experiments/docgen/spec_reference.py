"""The spec reference, read from the pydantic models that validate a spec: each field's type,
default, allowed values and description, so the page says what the validator accepts."""

from __future__ import annotations

import json
import re
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from critiquelab.experiments.docgen.markdown import cell, code, generated_note, table
from critiquelab.pipelines.params import PipelineParams

# Constraint attributes pydantic keeps in a field's metadata, as the page writes them.
_BOUNDS = (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"), ("min_length", "length ≥"),
           ("max_length", "length ≤"), ("pattern", "matches"))


def _nested(annotation: Any) -> list[type[BaseModel]]:
    """The spec models a field's type holds (a list's, a dict's values, an optional's)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [] if issubclass(annotation, PipelineParams) else [annotation]
    return [model for arg in get_args(annotation) for model in _nested(arg)]


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(sorted({type(choice).__name__ for choice in get_args(annotation)}))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(member) for member in get_args(annotation))
    if origin is list:
        return f"list[{_type_name(get_args(annotation)[0])}]"
    if origin is dict:
        key, value = get_args(annotation)
        return f"dict[{_type_name(key)}, {_type_name(value)}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, PipelineParams):
        return "mapping (the pipeline's params)"
    if origin is not None:  # Annotated and other wrappers: their base type
        return _type_name(get_args(annotation)[0])
    return getattr(annotation, "__name__", str(annotation))


def _choices(annotation: Any) -> list[Any]:
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    return [choice for arg in get_args(annotation) for choice in _choices(arg)]


def _allowed(field: FieldInfo) -> str:
    choices = _choices(field.annotation)
    if choices:
        return ", ".join(code(_yaml(choice)) for choice in choices)
    bounds = [f"{symbol} {getattr(constraint, key)}" for constraint in field.metadata
              for key, symbol in _BOUNDS if getattr(constraint, key, None) is not None]
    return cell(", ".join(bounds))


def _yaml(value: Any) -> str:
    """A value as a spec writes it (``null``, ``true``, a list in flow style)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its defaults"
    return code(_yaml(value)) if value != "" else '`""`'


def _anchor(prefix: str, path: str) -> str:
    return f"{prefix}-{path.replace('[]', '').replace('.', '-').lower()}" if path else prefix


def _linked(type_cell: str, anchors: dict[str, str]) -> str:
    """A type cell with each spec model's name a link to its section."""
    return re.sub(r"\b[A-Z]\w+\b", lambda m: f"[{m[0]}](#{anchors[m[0]]})" if m[0] in anchors else m[0],
                  type_cell)


def _section(prefix: str, path: str, model: type[BaseModel], anchors: dict[str, str]) -> str:
    anchor = _anchor(prefix, path)
    heading = f"### `{path}` {{#{anchor}}}\n" if path else f"### top level {{#{anchor}}}\n"
    doc = model.__doc__ if model.__doc__ != BaseModel.__doc__ else None
    intro = f"\n{cell(doc)}\n" if doc else ""
    rows = [
        [code(name), _linked(cell(_type_name(field.annotation)), anchors), _default(field), _allowed(field),
         cell(field.description or "")]
        for name, field in model.model_fields.items()
    ]
    return f"{heading}{intro}\n" + table(["field", "type", "default", "allowed", "description"], rows)


def _paths(root: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    """Every model under ``root`` with the path a spec reaches it by, root first, each once."""
    found: list[tuple[str, type[BaseModel]]] = [("", root)]
    seen = {root}
    for path, model in found:  # grows while iterating: breadth first
        for name, field in model.model_fields.items():
            suffix = "[]" if get_origin(field.annotation) is list else ""
            suffix += ".ROLE" if get_origin(field.annotation) is dict else ""
            for child in _nested(field.annotation):
                if child not in seen:
                    seen.add(child)
                    found.append((f"{path}.{name}{suffix}".lstrip("."), child))
    return found


def spec_section(title: str, prefix: str, root: type[BaseModel], intro: str) -> str:
    """One spec format: its top-level fields, then a section per nested model (anchors
    ``PREFIX-PATH``, e.g. ``run-dataset``)."""
    paths = _paths(root)
    anchors = {model.__name__: _anchor(prefix, path) for path, model in paths}
    sections = [_section(prefix, path, model, anchors) for path, model in paths]
    return "\n".join([f"## {title}\n\n{intro}\n", *sections])


def spec_page() -> str:
    from critiquelab.experiments.optimize.spec import OptimizeSpec
    from critiquelab.experiments.spec.experiment import ExperimentSpec

    return "\n".join([
        "# Spec reference\n",
        generated_note("the pydantic models that validate a spec "
                       "(`critiquelab.experiments.spec.experiment.ExperimentSpec`, "
                       "`critiquelab.experiments.optimize.spec.OptimizeSpec`)"),
        "A spec is YAML. Unknown keys are errors and values are taken as written, never converted "
        "(`seed: true` and `limit: \"5\"` are refused): bad input is one line naming the field, exit 2. "
        "A pipeline's `params` are listed per pipeline in the [pipeline reference](pipelines.md).\n",
        spec_section("Experiment spec (`critiquelab run`)", "run", ExperimentSpec,
                     "What `critiquelab run SPEC.yaml` reads; the command's options override some fields."),
        spec_section("Optimisation spec (`critiquelab optimize`)", "optimize", OptimizeSpec,
                     "What `critiquelab optimize SPEC.yaml` reads."),
    ])
