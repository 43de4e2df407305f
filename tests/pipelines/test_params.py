"""Typed pipeline params: every registered pipeline checks its params through its model, whether
built by name or directly, is built from that model without checking it again, and describes
them from the same model."""

import pytest
from pydantic import ValidationError
from support.bad_params import BAD_PARAMS

from critiquelab.core.config import explain
from critiquelab.core.errors import UserError
from critiquelab.pipelines.critic_loop.pipeline import CriticLoop, CriticLoopParams
from critiquelab.pipelines.debate.pipeline import Debate, DebateParams
from critiquelab.pipelines.params import agents_in_flight
from critiquelab.pipelines.registry import (
    build_pipeline,
    create_pipeline,
    describe_pipelines,
    params_model,
    pipeline_names,
    validate_params,
)
from critiquelab.pipelines.vote.pipeline import Vote, VoteParams
from critiquelab.runtime.parallel_agents import MAX_PARALLEL_AGENTS


def test_every_registered_pipeline_has_bad_cases():
    assert {name for name, _, _ in BAD_PARAMS} == set(pipeline_names())


@pytest.mark.parametrize(("name", "params", "expected"), BAD_PARAMS)
def test_bad_params_are_one_line_naming_pipeline_and_field(name, params, expected):
    with pytest.raises(UserError) as error:
        create_pipeline(name, **params)
    assert str(error.value) == f"pipeline '{name}': {expected}"


@pytest.mark.parametrize(("name", "params", "expected"), BAD_PARAMS)
def test_a_params_model_built_directly_checks_the_same_way(name, params, expected):
    model = params_model(name)
    with pytest.raises(ValidationError) as error:
        model(**params)  # how a notebook builds one: Debate(DebateParams(debaters=1))
    assert explain(error.value, where="pipeline", model=model, inside="params") == f"pipeline: {expected}"


def test_good_params_reach_the_module_with_defaults_filled_in():
    debate = create_pipeline("debate", debaters=2, topology="ring")
    assert debate.params == DebateParams(debaters=2, rounds=2, topology="ring", temperature=0.7)
    # the Python API DSPy users use: the model, or nothing for the defaults
    assert CriticLoop(CriticLoopParams(max_iterations=2)).params.max_iterations == 2
    assert Debate().params == DebateParams()
    assert create_pipeline("critic_loop", meta_critic=True).meta_critic is not None
    assert create_pipeline("critic_loop").meta_critic is None
    assert create_pipeline("vote", temperature=1).params.temperature == 1.0  # an int is a number


def test_validate_params_completes_without_building():
    assert validate_params("self_refine", {}).model_dump() == {"max_iterations": 3, "control": "none"}
    assert validate_params("vote", {"token_budget_from": "debate"}).token_budget_from == "debate"
    with pytest.raises(UserError, match="unknown pipeline 'nope'; registered: architect, baseline"):
        validate_params("nope", {})


def test_a_pipeline_is_built_from_its_checked_model_as_it_is():
    params = validate_params("debate", {"debaters": 2})
    assert build_pipeline("debate", params).params is params  # not validated (copied) again
    with pytest.raises(TypeError, match="pipeline 'debate' takes DebateParams, got VoteParams"):
        build_pipeline("debate", VoteParams())


def test_scheduling_params_are_read_as_attributes_and_left_out_of_keys():
    debate = DebateParams(parallel_agents=2)
    assert agents_in_flight(debate) == 2 and agents_in_flight(validate_params("baseline", {})) == 1
    assert debate.key_values() == {k: v for k, v in debate.model_dump().items() if k != "parallel_agents"}
    assert validate_params("self_refine", {}).key_values() == {"max_iterations": 3}


def test_vote_built_directly_refuses_an_unresolved_budget_label():
    with pytest.raises(UserError, match="token_budget_from: only an experiment run resolves it"):
        Vote(VoteParams(token_budget_from="debate"))
    assert Vote(VoteParams(token_budget=500.0)).params.token_budget == 500.0
    resolved = VoteParams(token_budget_from="debate").with_measured_budget(420.0)
    assert (resolved.token_budget, resolved.token_budget_from) == (420.0, None)


def test_every_pipeline_and_param_is_described():
    described = {p["name"]: p for p in describe_pipelines()}
    assert set(described) == set(pipeline_names())
    for pipeline in described.values():
        assert pipeline["summary"]
        assert all(param["description"] and param["type"] for param in pipeline["params"])
    assert described["baseline"]["params"] == []
    rows = {p["name"]: p for p in described["debate"]["params"]}
    assert rows["topology"] == {
        "name": "topology", "type": "str", "default": "full", "required": False,
        "allowed": "full, ring, star", "description": rows["topology"]["description"],
    }
    debaters = rows["debaters"]
    assert (debaters["type"], debaters["default"], debaters["allowed"]) == ("int", 3, ">= 2")
    budget = next(p for p in described["vote"]["params"] if p["name"] == "token_budget")
    assert (budget["type"], budget["default"], budget["allowed"]) == ("float | null", None, ">= 0")


# The shared fields (pipelines/params.py): out of range, every pipeline that takes one refuses the
# same value with the same words — none declares its own looser copy.
SHARED_OUT_OF_RANGE = [
    ("max_iterations", 0, "must be >= 1 (got 0)"),
    ("feedback_timeout_s", 0.0, "must be > 0.0 (got 0.0)"),
    ("parallel_agents", MAX_PARALLEL_AGENTS + 1,
     f"must be <= {MAX_PARALLEL_AGENTS} (got {MAX_PARALLEL_AGENTS + 1})"),
    ("temperature", 2.5, "must be <= 2.0 (got 2.5)"),
    ("n_tests", 51, "must be <= 50 (got 51)"),
]


@pytest.mark.parametrize(("field", "value", "expected"), SHARED_OUT_OF_RANGE)
def test_a_shared_field_has_one_range_in_every_pipeline(field, value, expected):
    takers = [name for name in pipeline_names()
              if field in {row["name"] for row in _described(name)["params"]}]
    assert len(takers) >= 2  # shared indeed
    for name in takers:
        with pytest.raises(UserError) as error:
            validate_params(name, {field: value})
        assert str(error.value) == f"pipeline '{name}': params.{field}: {expected}"


def _described(name):
    return next(row for row in describe_pipelines() if row["name"] == name)
