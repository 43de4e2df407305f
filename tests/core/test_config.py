"""One strict base for every configuration model, and one line for every bad value in one.

The base is found, not listed: every product module is imported and every strict model in it
must derive from :class:`StrictModel`, as must every model a spec, a pipeline's params or an
optimiser's params reaches.
"""

from __future__ import annotations

import importlib
import types
from pathlib import Path
from typing import Annotated, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from critiquelab.core.config import StrictModel, explain

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("core", "signatures", "eval", "pipelines", "optimizers", "experiments")


def _product_models() -> set[type[BaseModel]]:
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__main__":  # runs the CLI when imported
                continue
            module = parts[:-1] if parts[-1] == "__init__" else parts
            importlib.import_module(".".join(("critiquelab", *module)))
    found: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return {m for m in found if m.__module__.split(".")[:2] in [["critiquelab", p] for p in PRODUCT]}


def _reached(model: type[BaseModel]) -> set[type[BaseModel]]:
    """``model`` and every model its fields hold, however nested (lists, unions, mappings)."""
    seen: set[type[BaseModel]] = set()
    todo: list[object] = [model]
    while todo:
        annotation = todo.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in seen:
                seen.add(annotation)
                todo.extend(field.annotation for field in annotation.model_fields.values())
        elif get_origin(annotation) in (Annotated, Union, types.UnionType, list, tuple, set, frozenset, dict):
            todo.extend(get_args(annotation))
    return seen


def test_every_strict_model_of_the_product_derives_from_the_one_base():
    models = _product_models()
    assert len(models) > 50  # the walk found the product's models, not nothing
    written_out = sorted(
        f"{m.__module__}.{m.__qualname__}" for m in models
        if m.model_config.get("extra") == "forbid" and m.model_config.get("strict")
        and not issubclass(m, StrictModel)
    )
    assert written_out == []


def test_every_model_a_config_reaches_is_a_strict_model():
    from critiquelab.experiments.optimize.spec import OptimizeSpec
    from critiquelab.experiments.spec.experiment import ExperimentSpec
    from critiquelab.optimizers.optimizer_params import OPTIMIZER_PARAMS
    from critiquelab.pipelines.registry import params_model, pipeline_names

    roots = [ExperimentSpec, OptimizeSpec, *OPTIMIZER_PARAMS.values(), *map(params_model, pipeline_names())]
    reached = set().union(*map(_reached, roots))
    assert sorted(m.__qualname__ for m in reached if not issubclass(m, StrictModel)) == []


class _Inner(StrictModel):
    mode: Literal["fast", "slow"] = "fast"
    size: int = Field(default=1, ge=1)


class _Outer(StrictModel):
    name: str
    parts: list[_Inner] = Field(default_factory=list)
    limit: float | None = None

    @model_validator(mode="after")
    def _not_both(self) -> _Outer:
        if self.limit is not None and self.parts:
            raise ValueError("set limit or parts, not both")
        return self


def _line(data: object, inside: str = "") -> str:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate(data)
    return explain(caught.value, where="spec.yaml", model=_Outer, inside=inside)


def test_an_unknown_field_names_the_allowed_ones_and_comes_first():
    assert _line({"nme": "x"}) == (
        "spec.yaml: nme: unknown field; allowed: name, parts, limit (and 1 more problem)")


def test_a_wrong_type_is_refused_as_written():
    assert _line({"name": 3}) == "spec.yaml: name: expected a string, got 3"
    assert _line({"name": "x", "limit": "0.5"}) == (
        "spec.yaml: limit: expected a number, got '0.5' (a number in quotes is text: leave the quotes out)")


def test_a_missing_field_says_it_is_required():
    assert _line({}) == "spec.yaml: name: required (it has no default)"


def test_a_literal_lists_its_choices():
    assert _line({"name": "x", "parts": [{"mode": "warp"}]}) == (
        "spec.yaml: parts.0.mode: must be one of fast, slow (got 'warp')")


def test_a_nested_path_names_the_field_inside_the_list_and_the_model():
    assert _line({"name": "x", "parts": [{}, {"size": 0}]}) == "spec.yaml: parts.1.size: must be >= 1 (got 0)"
    assert _line({"name": "x", "parts": [{"sise": 2}]}) == (
        "spec.yaml: parts.0.sise: unknown field; allowed: mode, size")


def test_a_rule_across_fields_is_its_own_message_at_the_model():
    assert _line({"name": "x", "parts": [{}], "limit": 1.0}) == (
        "spec.yaml: (top level): set limit or parts, not both")
    assert _line({"name": "x", "parts": [{}], "limit": 1.0}, inside="params") == (
        "spec.yaml: params: set limit or parts, not both")


def test_an_odd_key_is_quoted_and_a_long_value_shortened():
    assert _line({"name": "x", "a b\nc": 1}) == (
        "spec.yaml: 'a b\\nc': unknown field; allowed: name, parts, limit")
    assert _line({"name": "x", "parts": [{"mode": "w" * 200}]}) == (
        f"spec.yaml: parts.0.mode: must be one of fast, slow (got '{'w' * 37}...{'w' * 38}')")


def test_a_model_with_no_fields_says_so():
    class Nothing(StrictModel):
        model_config = ConfigDict(frozen=True)

    with pytest.raises(ValidationError) as caught:
        Nothing.model_validate({"k": 1})
    assert explain(caught.value, where="pipeline 'baseline'", model=Nothing, inside="params") == (
        "pipeline 'baseline': params.k: unknown field; allowed: none, it takes no fields")
