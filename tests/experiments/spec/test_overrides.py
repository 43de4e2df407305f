"""RunOverrides: what run's options change in a spec, applied in one place, blamed on the option
when a value is bad."""

from __future__ import annotations

import pytest

from critiquelab.core.errors import UserError
from critiquelab.experiments.api import RunOverrides, load_experiment

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


@pytest.mark.parametrize("name", ["api_key_env", "api_base", "model", "prompts", "ray", "dataset"])
def test_an_empty_option_is_refused_not_read_as_absent(name):
    """`--api-key-env ""` used to leave the spec's key (or none) in place without a word."""
    with pytest.raises(UserError) as error:
        load_experiment(SPEC, RunOverrides(**{name: ""}))
    flag = "--" + name.replace("_", "-")
    assert str(error.value) == f"{flag} '': an empty value; leave the option out to keep the spec's"


@pytest.mark.parametrize("field", [("model", "api_key_env"), ("model", "api_base"), ("prompts",),
                                   ("pool", "chroma_url"), ("tracking", "uri")])
def test_an_empty_spec_value_is_refused_not_read_as_absent(field):
    data = {**SPEC, "model": dict(SPEC["model"])}
    (data.setdefault(field[0], {}) if len(field) > 1 else data)[field[-1]] = ""
    with pytest.raises(UserError, match=rf"^spec: {'.'.join(field)}: must not be empty"):
        load_experiment(data)


def test_a_value_refused_at_start_up_is_blamed_on_the_option_that_set_it(monkeypatch, tmp_path):
    """model.api_key_env and execution.address are checked when the model is served and the
    cluster joined, long after the spec was read: the line still names where the value came from."""
    from critiquelab.experiments.api import run

    monkeypatch.delenv("CRITIQUELAB_NO_SUCH_KEY", raising=False)
    remote = {**SPEC, "model": {"id": "openai/x", "api_base": "http://127.0.0.1:9/v1"}}
    with pytest.raises(UserError) as error:
        run(remote, overrides=RunOverrides(api_key_env="CRITIQUELAB_NO_SUCH_KEY"), home=tmp_path / "h")
    assert str(error.value) == "--api-key-env CRITIQUELAB_NO_SUCH_KEY: that environment variable is not set"
    own = {**remote, "model": {**remote["model"], "api_key_env": "CRITIQUELAB_NO_SUCH_KEY"}}
    with pytest.raises(UserError) as error:
        run(own, home=tmp_path / "h")
    assert str(error.value) == ("spec: model.api_key_env 'CRITIQUELAB_NO_SUCH_KEY': that environment "
                                "variable is not set")
    assert not (tmp_path / "h").exists()
