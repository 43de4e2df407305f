"""Property tests: whatever a researcher writes into a spec, parsing either gives a spec or one
UserError line — never another exception (a traceback)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from critiquelab.core.errors import UserError
from critiquelab.experiments.spec.experiment import parse_spec
from critiquelab.pipelines.registry import params_model

FIELDS = ["name", "dataset", "model", "pipelines", "seeds", "execution", "pool", "tracking",
          "prompts", "concurrency", "source", "limit", "task_ids", "format", "id", "temperature",
          "max_tokens", "timeout_s", "num_retries", "params", "label", "k", "debaters", "topology",
          "max_iterations", "uri", "persist", "fields", "challenge_tests", "rounds"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["baseline", "critic_loop", "debate", "vote", "self_refine", "humaneval", "mbpp",
                     "local", "openai/x", "ring", "../../x", ""]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _one_line(error: UserError) -> bool:
    text = str(error)
    return bool(text.strip()) and "\n" not in text.strip()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), values, max_size=6))
@example({"name": "0", "dataset": {"\n": None}})  # found by this test: a key holding a line break
def test_any_mapping_is_a_spec_or_one_line(data):
    try:
        parse_spec(data, "spec.yaml")
    except UserError as error:
        assert _one_line(error), str(error)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(FIELDS), values, max_size=4), max_size=3), values)
def test_any_pipeline_list_is_checked_up_front(pipelines, seeds):
    try:
        spec = parse_spec({"name": "x", "pipelines": pipelines, "seeds": seeds}, "spec.yaml")
    except UserError as error:
        assert _one_line(error), str(error)
    else:  # accepted: every pipeline's params are complete and typed: its own model
        assert all(type(p.params) is params_model(p.name) for p in spec.pipelines)
        assert all(0 <= seed <= 2**31 - 1 for seed in spec.seeds)


def _leaves(model: type, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """(path, annotation) of every scalar or collection field of ``model`` and its sub-models."""
    import types
    import typing

    from pydantic import BaseModel

    found = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        members = typing.get_args(annotation) if union else (annotation,)
        members = tuple(m for m in members if m is not type(None))
        nested = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        if nested:
            found += _leaves(nested[0], (*path, name))
        elif name != "params":  # a pipeline's (an optimiser's) params have their own strict model and tests
            found.append(((*path, name), members if len(members) > 1 else members[0]))
    return found


def _wrong_values(annotation: object) -> st.SearchStrategy:
    """Values of another type than ``annotation`` that a lax parser would convert."""
    import typing

    origin = typing.get_origin(annotation)
    if annotation == (int, float):  # a count or a fraction (an optimisation's split): never either
        return st.sampled_from([True, "3", "0.5", 1.5, 3.0, 0, 0.0, float("nan"), float("inf")])
    if annotation is bool:
        return st.sampled_from([1, 0, "true", "yes"])
    if annotation is int:
        return st.sampled_from([True, "3", 2.5, "1e3"])
    if annotation is float:
        return st.sampled_from([True, "0.5", "nan", float("nan"), float("inf")])
    if origin is list:
        (item,) = typing.get_args(annotation)
        return st.sampled_from(["one", 3]) | _wrong_values(item).map(lambda v: [v])
    if origin is dict:
        return st.sampled_from(["x", [1], 3])
    return st.sampled_from([3, True, 1.5, ["x"]])  # str, Literal of str


def _base_spec() -> dict:
    return {"name": "x", "model": {"id": "openai/x", "api_base": "http://127.0.0.1:9/v1"},
            "pipelines": [{"name": "baseline"}]}


def _spec_leaves() -> list[tuple[tuple[str, ...], object]]:
    from critiquelab.experiments.spec.experiment import ExperimentSpec
    from critiquelab.experiments.spec.pipeline_spec import PipelineSpec

    top = [leaf for leaf in _leaves(ExperimentSpec) if leaf[0][0] != "pipelines"]
    return top + [(("pipelines", 0, *path), annotation) for path, annotation in _leaves(PipelineSpec)
                  if path[0] not in ("name", "roles", "memory")]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_every_field_refuses_a_value_it_would_have_to_convert(data):
    """Strict everywhere (issue #37): `seeds: [true]` must not run seed 1, nor `concurrency: true`
    become 1, nor `temperature: "0.5"` be read as 0.5 — one line naming the field instead."""
    path, annotation = data.draw(st.sampled_from(_spec_leaves()))
    wrong = data.draw(_wrong_values(annotation))
    spec = _base_spec()
    where: dict | list = spec
    for key in path[:-1]:
        where = where[key] if isinstance(key, int) else where.setdefault(key, {})
    where[path[-1]] = wrong
    try:
        parse_spec(spec, "spec.yaml")
    except UserError as error:
        assert _one_line(error), str(error)
        shown = ".".join(str(p) for p in path)
        assert f"spec.yaml: {shown}" in str(error), (shown, str(error))
    else:
        raise AssertionError(f"{'.'.join(map(str, path))} = {wrong!r} was accepted")


OPTIMIZE_FIELDS = ["name", "pipeline", "optimizer", "split", "dataset", "model", "traces", "refine",
                   "teacher", "execution", "tracking", "seed", "train", "val", "allow_overlap", "params",
                   "role", "steps", "batch_size", "run_ids", "experiment", "id", "source", "limit"]


def _base_optimize_spec() -> dict:
    return {"name": "x", "pipeline": {"name": "baseline"},
            "model": {"id": "openai/x", "api_base": "http://127.0.0.1:9/v1"}}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(OPTIMIZE_FIELDS), values, max_size=6))
def test_any_mapping_is_an_optimize_spec_or_one_line(data):
    from critiquelab.experiments.optimize.spec import parse_optimize_spec

    try:
        parse_optimize_spec({**_base_optimize_spec(), **data}, "opt.yaml")
    except UserError as error:
        assert _one_line(error), str(error)


def _optimize_leaves() -> list[tuple[tuple[str, ...], object]]:
    from critiquelab.experiments.optimize.spec import OptimizeSpec

    return [leaf for leaf in _leaves(OptimizeSpec)
            if leaf[0][0] != "pipeline" or leaf[0][1] not in ("name", "roles", "memory")]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_every_optimize_field_refuses_a_value_it_would_have_to_convert(data):
    """The optimisation spec is as strict as an experiment's: `split: {seed: true}`,
    `allow_overlap: "yes"`, `val: "0.25"` or `train: 1.5` are one line naming the field."""
    from critiquelab.experiments.optimize.spec import parse_optimize_spec

    path, annotation = data.draw(st.sampled_from(_optimize_leaves()))
    wrong = data.draw(_wrong_values(annotation))
    spec = _base_optimize_spec()
    where: dict = spec
    for key in path[:-1]:
        where = where.setdefault(key, {})
    where[path[-1]] = wrong
    try:
        parse_optimize_spec(spec, "opt.yaml")
    except UserError as error:
        assert _one_line(error), str(error)
        shown = ".".join(str(p) for p in path)
        assert f"opt.yaml: {shown}" in str(error), (shown, str(error))
    else:
        raise AssertionError(f"{'.'.join(map(str, path))} = {wrong!r} was accepted")
