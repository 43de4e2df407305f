"""RunOverrides: what run's options change in a spec, applied in one place, blamed on the option
when a value is bad."""

from __future__ import annotations

import pytest

from core.errors import UserError
from experiments.api import RunOverrides, load_experiment

SPEC = {"name": "x", "pipelines": [{"name": "baseline"}], "model": {"id": "local", "temperature": 0.2}}


def test_each_option_replaces_its_field_and_unset_ones_keep_the_spec():
    spec = load_experiment(SPEC, RunOverrides(
        model="openai/gpt-4o-mini", api_base="http://h/v1", request_timeout=30, limit=3,
        task_ids=["HumanEval/0"], seeds=[1, 2], concurrency=2, format="mbpp", prompts="out/p", ray="auto",
    ))
    assert (spec.model.id, spec.model.api_base) == ("openai/gpt-4o-mini", "http://h/v1")
    assert spec.model.timeout_s == 30
    assert spec.model.temperature == 0.2  # not overridden: the spec's
    assert (spec.dataset.limit, spec.dataset.task_ids, spec.dataset.format) == (3, ["HumanEval/0"], "mbpp")
    assert (spec.seeds, spec.concurrency, spec.prompts) == ([1, 2], 2, "out/p")
    assert (spec.execution.executor, spec.execution.address) == ("ray", "auto")
    assert load_experiment(SPEC).dataset.limit is None


def test_applying_leaves_the_callers_spec_alone():
    data = {**SPEC, "dataset": {"limit": 5}}
    patched = RunOverrides(limit=1, seeds=[3]).apply(data)
    assert patched["dataset"] == {"limit": 1} and patched["seeds"] == [3]
    assert data == {**SPEC, "dataset": {"limit": 5}}


@pytest.mark.parametrize(("overrides", "line"), [
    (RunOverrides(limit=0), "--limit 0: must be >= 1"),
    (RunOverrides(concurrency=65), "--concurrency 65: must be <= 64"),
    (RunOverrides(seeds=[1, 1]), "--seeds 1,1: seeds must be unique"),
])
def test_a_bad_option_is_blamed_on_the_option(overrides, line):
    with pytest.raises(UserError) as error:
        load_experiment(SPEC, overrides)
    assert str(error.value) == line


VOTE_16 = {**SPEC, "pipelines": [{"name": "vote", "params": {"parallel_agents": 16}}]}


@pytest.mark.parametrize(("data", "overrides", "line"), [
    # A problem of a whole section, or across fields: blamed on the option that brought it.
    (SPEC, RunOverrides(dataset="hf://"),
     "--dataset hf://: dataset 'hf://': expected hf://OWNER/NAME, e.g. hf://openai/openai_humaneval"),
    (VOTE_16, RunOverrides(concurrency=8),
     "--concurrency 8: concurrency 8 × pipeline 'vote' params.parallel_agents 16 = 128 model calls at once; "
     "at most 64"),
    # ... and on the spec when its own values are at fault, whatever the options.
    ({**SPEC, "dataset": {"source": "hf://"}}, RunOverrides(limit=2),
     "spec: dataset: dataset 'hf://': expected hf://OWNER/NAME, e.g. hf://openai/openai_humaneval"),
    ({**VOTE_16, "concurrency": 8}, RunOverrides(seeds=[1]),
     "spec: (top level): concurrency 8 × pipeline 'vote' params.parallel_agents 16 = 128 model calls at "
     "once; at most 64"),
])
def test_a_problem_across_fields_is_blamed_on_where_the_value_came_from(data, overrides, line):
    with pytest.raises(UserError) as error:
        load_experiment(data, overrides)
    assert str(error.value) == line


def test_the_spec_is_blamed_for_its_own_values():
    with pytest.raises(UserError, match=r"^spec: dataset.limit: "):
        load_experiment({**SPEC, "dataset": {"limit": 0}}, RunOverrides(seeds=[0]))
    # a section the spec wrote wrongly is the spec's error, whatever the options
    with pytest.raises(UserError, match=r"^spec: dataset: "):
        load_experiment({**SPEC, "dataset": "humaneval"}, RunOverrides(limit=2))
