"""compare's cost by model: each model's tokens weighed by its measured seconds per token, the
seconds kept with the LM cache so a replayed run costs what the live one did."""

import math

import pandas as pd
import pytest
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.compare.compared_run import ComparedRun
from critiquelab.experiments.compare.model_cost import model_cost_frame, seconds_per_token
from critiquelab.experiments.compare.runs import compare_runs


def _run(label):
    return ComparedRun(f"id-{label}", "parent", "0", label, 0)


def test_tokens_are_weighed_by_each_models_seconds_per_token_pooled_over_runs():
    mixed = {"problems": 2, "wall_time_s": 10.0, "model.a.tokens": 300, "model.b.tokens": 100,
             "model.a.model_s": 3.0, "model.a.timed_tokens": 300,
             "model.b.model_s": 4.0, "model.b.timed_tokens": 80}  # 20 of b's tokens came untimed
    other = {"problems": 2, "model.a.tokens": 100, "model.b.tokens": 100,
             "model.a.model_s": 1.0, "model.a.timed_tokens": 100,
             "model.b.model_s": 6.0, "model.b.timed_tokens": 120}
    single = {"problems": 4, "wall_time_s": 2.0, "total_tokens": 400}  # ran on the default only
    assert seconds_per_token([mixed, other, single]) == {"a": 0.01, "b": 0.05}

    frame, _ = model_cost_frame([_run("mixed"), _run("other"), _run("single")],
                                [mixed, other, single], ["a", "a", "a"])
    rows = frame.set_index("pipeline")
    assert rows.loc["mixed", "model_s/problem"] == pytest.approx((300 * 0.01 + 100 * 0.05) / 2)
    assert rows.loc["single", "tokens/problem a"] == 100 and rows.loc["single", "tokens/problem b"] == 0
    assert rows.loc["single", "model_s/problem"] == pytest.approx(1.0)
    assert "wall_s/problem" not in rows  # a resumed run's wall time covers its last invocation only


def test_a_model_whose_speed_was_never_measured_gets_no_model_time():
    untimed = {"problems": 1, "model.a.tokens": 50, "model.b.tokens": 50,
               "model.a.model_s": 1.0, "model.a.timed_tokens": 50}
    frame, speeds = model_cost_frame([_run("x")], [untimed], ["a"])
    assert speeds == {"a": 0.02}
    assert math.isnan(frame.loc[0, "model_s/problem"])


def test_a_slower_critic_model_costs_more_per_token_and_a_replay_from_the_cache_costs_the_same(
    home, humaneval_problems, tmp_path
):
    scripts = critic_loop_scripts(humaneval_problems)
    with FakeOpenAIServer(role_responder(scripts)) as main_lm, \
            FakeOpenAIServer(role_responder(scripts), delay_s=0.3) as critic_lm:
        roles = {"critic": {"model": "openai/critic-model", "api_base": critic_lm.api_base}}
        pipelines = [{"name": "baseline"},
                     {"name": "critic_loop", "params": {"max_iterations": 2}, "roles": roles}]
        spec = fake_spec(main_lm.api_base, pipelines=pipelines, limit=2)
        live = run(spec, progress=False, compare=False)
        replayed = run(spec, progress=False, compare=False, fresh=True)  # every call from the LM cache

    reports = []
    for result in (live, replayed):
        mixed = next(c for c in result.children if c.pipeline == "critic_loop")
        assert mixed.metrics["model.openai/critic-model.timed_tokens"] == mixed.metrics[
            "model.openai/critic-model.tokens"] > 0
        reports.append(compare_runs(result.parent_run_id, home=home, n_resamples=99, log=False,
                                    out=tmp_path / result.parent_run_id))
    assert replayed.children[0].results[0].cached_lm_calls == replayed.children[0].results[0].lm_calls
    frames = [pd.read_csv(report.files["model_cost"]).set_index("pipeline") for report in reports]
    live_frame, replayed_frame = frames
    assert list(live_frame.index) == ["baseline", "critic_loop"]
    assert live_frame.loc["baseline", "tokens/problem openai/critic-model"] == 0
    assert live_frame.loc["critic_loop", "tokens/problem openai/critic-model"] > 0
    assert live_frame.loc["critic_loop", "model_s/problem"] > live_frame.loc["baseline", "model_s/problem"]
    assert replayed_frame["model_s/problem"].tolist() == pytest.approx(
        live_frame["model_s/problem"].tolist(), rel=0.05)
    assert "## Cost by model" in reports[0].markdown and "openai/critic-model" in reports[0].markdown
    html = reports[0].files["html"].read_text()
    assert "Cost by model" in html


def test_a_comparison_on_one_model_has_no_cost_section(home, humaneval_problems, tmp_path):
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        pipelines = [{"name": "baseline"}, {"name": "critic_loop", "params": {"max_iterations": 2}}]
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=1), progress=False, compare=False)
    report = compare_runs(result.parent_run_id, home=home, n_resamples=99, log=False, out=tmp_path / "r")
    assert "model_cost" not in report.files and "Cost by model" not in report.markdown
