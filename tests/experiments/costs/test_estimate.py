"""`run --estimate`: the cost of an experiment from earlier problems in the data directory (or the
shipped defaults for the bundled model), without calling the model or writing anything."""

import gc
import logging
import statistics
from pathlib import Path

import pytest
import yaml
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import RunOverrides, estimate, run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.costs.estimate import SHIPPED

DATA = Path(__file__).parents[2] / "eval" / "data"


def _state(path):
    """Every file and directory under ``path`` with its size and modification time."""
    # The LM cache keeps one SQLite connection per thread; those of an earlier run's finished
    # worker threads close (and fold their WAL into the database) only when collected.
    gc.collect()
    if not path.exists():
        return None
    return {
        (str(p.relative_to(path)), p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
        for p in path.rglob("*")
    }


def _spec(api_base, **extra):
    pipelines = [{"name": "baseline"}, {"name": "critic_loop", "params": {"max_iterations": 2}}]
    return fake_spec(api_base, pipelines=pipelines, limit=4, pool={"persist": False}, **extra)


@pytest.fixture
def measured(home, humaneval_problems):
    """A finished run of baseline and critic_loop on 4 problems, and the live fake endpoint."""
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        result = run(_spec(fake.api_base), progress=False, compare=False)
        yield fake, result


def test_estimate_uses_measured_means_and_counts_only_problems_to_do(home, tmp_path, measured, capsys):
    fake, result = measured
    calls, before = fake.completions, _state(home)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(_spec(fake.api_base)))

    code = main(["--home", str(home), "run", str(spec_file), "--limit", "8", "--estimate"])
    printed = capsys.readouterr().out
    found = estimate(_spec(fake.api_base), overrides=RunOverrides(limit=8), home=home)

    assert code == 0 and "measured (4)" in printed and "\ntotal " in printed
    assert fake.completions == calls  # no model call, not even the pre-flight probe
    assert _state(home) == before  # nothing written: no run, no checkpoint, no manifest
    for child, row in zip(result.children, found.pipelines, strict=True):
        assert (row.label, row.problems, row.done, row.pending) == (child.pipeline, 8, 4, 4)
        assert (row.source, row.measured_problems) == ("measured", 4)
        for name in ("lm_calls", "prompt_tokens", "completion_tokens"):
            mean = statistics.fmean(getattr(r, name) for r in child.results)
            assert getattr(row.per_problem, name) == pytest.approx(mean)
            assert getattr(row, name).expected == pytest.approx(4 * mean)
        latency = statistics.fmean(r.latency_s for r in child.results)
        assert row.wall_s.expected == pytest.approx(4 * latency / 4)  # 4 problems at once (the default)
        assert row.lm_calls.low <= row.lm_calls.expected <= row.lm_calls.high
    critic = found.pipelines[1]
    # Every critic-loop problem made a different number of calls than the baseline's one.
    assert critic.per_problem.lm_calls > found.pipelines[0].per_problem.lm_calls == 1
    assert found.total("lm_calls").expected == pytest.approx(
        sum(row.lm_calls.expected for row in found.pipelines)
    )


def test_a_finished_run_costs_nothing_more(home, measured):
    fake, _ = measured
    found = estimate(_spec(fake.api_base), home=home)
    assert [(row.done, row.pending) for row in found.pipelines] == [(4, 0), (4, 0)]
    assert found.total("lm_calls").expected == 0 and found.total("wall_s").expected == 0
    fresh = estimate(_spec(fake.api_base), home=home, fresh=True)  # --fresh redoes every problem
    assert [(row.done, row.pending) for row in fresh.pipelines] == [(0, 4), (0, 4)]


def test_other_experiments_lend_costs_only_for_the_same_pipeline_and_params(home, measured):
    fake, result = measured
    other = _spec(fake.api_base, name="another-experiment", concurrency=2)
    other["pipelines"][1]["params"] = {"max_iterations": 3}  # the critic loop run differently
    found = estimate(other, home=home)
    baseline, critic = found.pipelines
    assert (baseline.done, baseline.pending, baseline.source) == (0, 4, "measured")
    latency = statistics.fmean(r.latency_s for r in result.children[0].results)
    assert baseline.wall_s.expected == pytest.approx(4 * latency / 2)  # two problems at once
    assert critic.source == "unknown" and critic.lm_calls is None
    assert found.unknown == ["critic_loop"]


def test_parallel_agents_shares_costs_like_it_shares_checkpoints(home, humaneval_problems):
    vote = {"name": "vote", "params": {"k": 2, "parallel_agents": 1}}
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        run(fake_spec(fake.api_base, pipelines=[vote], limit=2, pool={"persist": False}), progress=False)
        vote["params"] = {"k": 2, "parallel_agents": 2}
        found = estimate(fake_spec(fake.api_base, pipelines=[vote], limit=3), home=home)
        vote["params"] = {"k": 3, "parallel_agents": 2}
        other = estimate(fake_spec(fake.api_base, pipelines=[vote], limit=3), home=home)
    (row,) = found.pipelines
    assert (row.done, row.pending, row.source, row.per_problem.lm_calls) == (2, 1, "measured", 2)
    assert other.pipelines[0].source == "unknown"  # k changes the calls: not the same cost


def test_a_store_from_before_manifests_still_counts_for_its_own_configuration(home, measured):
    fake, _ = measured
    (manifest,) = (home / "checkpoints").glob("*/manifest.json")
    manifest.unlink()
    same = estimate(_spec(fake.api_base), overrides=RunOverrides(limit=8), home=home)
    assert [row.source for row in same.pipelines] == ["measured", "measured"]
    renamed = estimate(_spec(fake.api_base, name="renamed"), home=home)
    assert [row.source for row in renamed.pipelines] == ["unknown", "unknown"]


def test_fresh_home_uses_shipped_defaults_for_the_bundled_model(tmp_path, monkeypatch):
    home, cache = tmp_path / "home", tmp_path / "model-cache"
    monkeypatch.setenv("CRITIQUELAB_CACHE", str(cache))  # no model file: none is needed, none assembled
    spec = {
        "name": "estimate-defaults", "dataset": {"limit": 5},
        "model": {"id": "local", "server": "llama-cpp-python"},
        "pipelines": [
            {"name": "baseline"},
            {"name": "debate", "params": {"debaters": 2, "rounds": 1}},
            {"name": "vote", "params": {"k": 3}},
            {"name": "vote", "label": "vote_at_budget", "params": {"token_budget_from": "baseline"}},
            {"name": "self_refine"},
            # role settings change the answers the shipped figures were measured with
            {"name": "baseline", "label": "sampled_coder", "roles": {"coder": {"temperature": 0.8}}},
            # No shipped run measured a critic panel's or a test writer's calls: unknown, not guessed.
            {"name": "critic_loop", "label": "panel",
             "params": {"execution_feedback": True, "critics": ["correctness"]}},
            {"name": "vote", "label": "vote_generated", "params": {"k": 3, "tests": "generated"}},
            {"name": "vote", "label": "vote_greedy_first", "params": {"k": 3, "greedy_first": True}},
        ],
        "seeds": [0, 1],
    }
    found = estimate(spec, overrides=RunOverrides(concurrency=4), home=home)
    assert not home.exists() and not cache.exists()
    rows = {(row.label, row.seed): row for row in found.pipelines}
    baseline, debate = rows[("baseline", 1)], rows[("debate", 0)]
    assert (baseline.source, baseline.pending, baseline.per_problem.lm_calls) == ("default", 5, 1)
    assert baseline.prompt_tokens.expected == pytest.approx(5 * SHIPPED["baseline"].prompt_tokens)
    one_at_a_time = SHIPPED["baseline"].seconds["llama-cpp-python"]
    assert baseline.wall_s.expected == pytest.approx(5 * one_at_a_time)
    assert debate.per_problem.lm_calls == 2 * (1 + 1) + 1  # proposals, one round of arguments, judge
    assert debate.completion_tokens.expected == pytest.approx(5 * SHIPPED["debate"].completion_tokens / 2)
    assert rows[("vote", 0)].lm_calls.expected == 5 * 3
    # One baseline problem's tokens (422) buy one vote sample (425 tokens at the shipped figures).
    assert rows[("vote_at_budget", 0)].per_problem.lm_calls == 1
    assert rows[("self_refine", 0)].source == "unknown"
    assert sorted(found.unknown) == ["panel", "sampled_coder", "self_refine", "vote_generated",
                                     "vote_greedy_first"]
    assert "with these role settings" in rows[("sampled_coder", 0)].basis
    assert "self_refine: unknown" in found.table()
    # llama-server serves the concurrency's problems at once (the shipped times were measured so).
    monkeypatch.setattr("critiquelab.experiments.costs.estimate.find_built_server", lambda: object())
    spec["model"]["server"] = "auto"
    served = estimate(spec, overrides=RunOverrides(concurrency=4), home=home)
    rows = {(row.label, row.seed): row for row in served.pipelines}
    assert served.parallel == 4
    served_s = SHIPPED["baseline"].seconds["llama-server"]
    assert rows[("baseline", 1)].wall_s.expected == pytest.approx(5 * served_s / 4)


def test_remote_model_without_history_is_unknown_and_not_contacted(home, capsys, tmp_path):
    spec = tmp_path / "remote.yaml"
    spec.write_text(yaml.safe_dump(fake_spec("http://127.0.0.1:9/v1")))  # nothing listens there
    code = main(["--home", str(home), "run", str(spec), "--estimate"])
    out = capsys.readouterr().out
    assert code == 0 and not home.exists()
    assert "baseline     0      3     0" in out and "unknown" in out and "+ ?" in out


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        ("name: x\npipelines: [{name: debate, params: {rounds: -1}}]\n", [], "params.rounds"),
        ("name: x\npipelines: [{name: baseline}]\n", ["--dataset", "no/such.jsonl"], "no/such.jsonl"),
        ("name: x\npipelines: [{name: baseline}]\n", ["--model", "gpt-4o"], "model 'gpt-4o'"),
        ("name: x\npipelines: [{name: baseline}]\n", ["--limit", "0"], "--limit 0: must be >= 1"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, home, text, args, expected):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    code = main(["--home", str(home), "run", str(spec), "--estimate", *args])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and expected in err, err
    assert not home.exists()


def test_a_budgeted_pipeline_counts_as_done_only_under_the_budget_it_would_resolve(home, humaneval_problems):
    """vote's token_budget_from baseline is the baseline's mean on the problems of the run: rows
    checkpointed under another subset's budget are still to do; unknown until the source is done."""
    from support.fake_openai import humaneval_responder

    pipelines = [{"name": "baseline"},
                 {"name": "vote", "params": {"token_budget_from": "baseline", "max_samples": 4}}]

    def spec(api_base, limit):
        return fake_spec(api_base, pipelines=pipelines, limit=limit, pool={"persist": False})

    def done(api_base, limit):
        return [(row.label, row.done) for row in estimate(spec(api_base, limit), home=home).pipelines]

    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        run(spec(fake.api_base, 1), progress=False, compare=False)
        assert done(fake.api_base, 1) == [("baseline", 1), ("vote", 1)]
        assert done(fake.api_base, 2) == [("baseline", 1), ("vote", 0)]  # its budget is not known yet
        run(spec(fake.api_base, 2), progress=False, compare=False)
        assert done(fake.api_base, 2) == [("baseline", 2), ("vote", 2)]
        assert done(fake.api_base, 1) == [("baseline", 1), ("vote", 1)]  # the first run's budget


def test_a_pipeline_with_memory_is_timed_one_problem_at_a_time(home, humaneval_problems):
    """Memory solves its problems in order, one at a time: its wall time is not divided by the
    concurrency (it was, so an estimate of a memory experiment came out 4× too short)."""
    memory = {"enabled": True, "approval": "auto", "store": "estimate_memory", "reflect": False}
    pipelines = [{"name": "baseline"}, {"name": "baseline", "label": "baseline+memory", "memory": memory}]
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        spec = fake_spec(fake.api_base, pipelines=pipelines, limit=4, pool={"persist": False},
                         parallel_runs=2)
        result = run(spec, progress=False, compare=False)
        found = estimate({**spec, "dataset": {**spec["dataset"], "limit": 8}}, home=home)
    for child, row, divisor in zip(result.children, found.pipelines, (4, 1), strict=True):
        seconds = [r.latency_s for r in child.results if r.cached_lm_calls < r.lm_calls]
        assert row.wall_s.expected == pytest.approx(4 * statistics.fmean(seconds) / divisor)
    assert found.in_order == ["baseline+memory"] and found.parallel_runs == 2
    table = found.table()
    assert "baseline+memory: memory solves one problem at a time" in table
    assert "parallel_runs 2: runs overlap" in table


def test_an_estimate_on_a_dataset_of_detected_format_says_which_it_read(home, tmp_path, capsys, caplog):
    dataset = DATA / "humaneval.jsonl"  # no format given: detected from its columns
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(fake_spec("http://127.0.0.1:9", dataset={"source": str(dataset)})))
    with caplog.at_level(logging.WARNING):
        code = main(["--home", str(home), "run", str(spec_file), "--estimate"])
    assert code == 0, capsys.readouterr().err
    notices = [r.getMessage() for r in caplog.records if "read as format 'humaneval'" in r.getMessage()]
    assert len(notices) == 1 and str(dataset) in notices[0]
    assert not home.exists()
