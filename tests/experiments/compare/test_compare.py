"""critiquelab compare: report files, tables, paired tests and MLflow artifacts, on runs written
by the real runner (fake endpoint) and on synthetic debate-style runs written with Tracker."""

import json

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec

from critiquelab.core.errors import UserError
from critiquelab.eval.results import ProblemResult, results_table
from critiquelab.eval.verdict import Status
from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.compare.runs import COMPARISON_TAG, compare_runs
from critiquelab.experiments.tracking.store import Tracker, tracking_uri

TASKS = [f"T/{i}" for i in range(12)]


def _results(label, seed, passed, tokens, **extra):
    return [
        ProblemResult(task_id=task, pipeline=label, seed=seed, status=Status.PASSED if p else Status.FAILED,
                      prompt_tokens=tokens, completion_tokens=tokens // 2, lm_calls=1,
                      extra={k: v[i] for k, v in extra.items()})
        for i, (task, p) in enumerate(zip(TASKS, passed, strict=True))
    ]


def _synthetic_experiment(home):
    """baseline, critic and debate × seeds 0, 1 under one parent: outcomes chosen so every
    metric has a known value."""
    tracker = Tracker(home, "synthetic")
    parent = tracker.start_run("synthetic")
    base = [True] * 6 + [False] * 6
    critic = [True] * 9 + [False] * 3
    debate = [True] * 11 + [False]
    first = [True] * 6 + [False] * 6
    consensus = [True] * 10 + [False] * 2
    children = {  # label: its results; compare reads each label's own metrics from its pipeline's model
        "baseline": dict(passed=base, tokens=100),
        "critic": dict(passed=critic, tokens=400, first_passed=first, changes_requested=[True] * 12,
                       messages=[5] * 12),
        "debate": dict(passed=debate, tokens=1000, consensus=consensus, final_in_majority=[True] * 12,
                       agreement=[[1 / 3, 1.0]] * 12, debaters_first_passed=[[True, False, False]] * 12,
                       debaters_final_passed=[[True, True, False]] * 12),
    }
    pipelines = {"baseline": "baseline", "critic": "critic_loop", "debate": "debate"}
    for label, spec in children.items():
        for seed in (0, 1):
            run_id = tracker.start_run(f"{label}-seed{seed}", parent_id=parent)
            tracker.log_params(run_id, {"pipeline": pipelines[label], "pipeline.label": label, "seed": seed})
            tracker.log_frame(run_id, results_table(_results(label, seed, **spec)), "problems")
            if label == "baseline":  # two messages per problem, from the message log
                lines = [json.dumps({"task_id": t, "run_id": run_id}) for t in TASKS for _ in (1, 2)]
                log = "".join(line + "\n" for line in lines)
                tracker.log_text(run_id, log, "messages.jsonl")
            tracker.finish(run_id)
    tracker.finish(parent)
    return parent


def test_compare_parent_run_writes_report_and_logs_it(home):
    parent = _synthetic_experiment(home)
    result = compare_runs(parent, home=home, n_resamples=999, bootstrap_seed=5)

    assert result.out_dir == home / "reports" / parent
    for key in ("html", "markdown", "pass_plot", "cost_plot"):
        assert result.files[key].is_file() and result.files[key].stat().st_size > 0
    html = result.files["html"].read_text()
    assert html.count("data:image/png;base64,") == 2 and "<img" in html and "src=\"pass" not in html
    assert result.files["markdown"].read_text() == result.markdown

    table = result.table.set_index("pipeline")
    assert list(table.index) == ["baseline", "critic", "debate"]
    assert list(table["pass@1"]) == pytest.approx([0.5, 0.75, 11 / 12])
    assert list(table["attempts"]) == [24, 24, 24] and list(table["problems"]) == [12, 12, 12]
    assert table.loc["baseline", "ci_low"] < 0.5 < table.loc["baseline", "ci_high"]
    assert table.loc["baseline", "messages/problem"] == 2.0
    assert table.loc["critic", "messages/problem"] == 5.0
    assert table.loc["baseline", "tokens/problem"] == 150.0
    assert table.loc["baseline", "pass@1_per_1k_tokens"] == pytest.approx(0.5 / 0.15)
    assert table.loc["critic", "critique_success_rate"] == pytest.approx(0.5)
    assert table.loc["critic", "harmful_revision_rate"] == 0.0
    assert pd.isna(table.loc["baseline", "consensus_rate"])
    assert table.loc["debate", "consensus_rate"] == pytest.approx(10 / 12)
    assert table.loc["debate", "consensus_correctness"] == pytest.approx(10 / 12)
    assert table.loc["debate", "flips_wrong_to_correct"] == 24
    assert table.loc["debate", "flips_correct_to_wrong"] == 0

    pairs = result.pairs.set_index(["a", "b"])
    assert set(pairs.index) == {("baseline", "critic"), ("baseline", "debate"), ("critic", "debate")}
    bd = pairs.loc[("baseline", "debate")]
    assert (bd["pairs"], bd["only_a"], bd["only_b"]) == (24, 0, 10)
    assert bd["mcnemar_p"] == pytest.approx(2 / 2**10)
    assert bd["difference"] == pytest.approx(0.5 - 11 / 12)
    assert bd["ci_low"] <= bd["difference"] <= bd["ci_high"] < 0
    assert pairs["mcnemar_p"].between(0, 1).all() and pairs[["ci_low", "ci_high"]].notna().all().all()
    assert (pairs["bootstrap_seed"] == 5).all()

    again = compare_runs(parent, home=home, n_resamples=999, bootstrap_seed=5, log=False)
    pd.testing.assert_frame_equal(again.pairs, result.pairs)  # the seeded bootstrap replays

    client = MlflowClient(tracking_uri(home))
    assert result.logged_run_id == parent
    logged = {a.path for a in client.list_artifacts(parent, "comparison")}
    assert {"comparison/report.html", "comparison/summary.md", "comparison/pass_at_1.png",
            "comparison/pass_vs_tokens.png", "comparison/pairwise.csv"} <= logged
    assert client.get_run(parent).data.tags["compare.bootstrap_seed"] == "5"
    assert "| debate | 2 | 12 |" in result.markdown and "Paired comparisons" in result.markdown


def test_compare_explicit_runs_across_parents(home, humaneval_problems, capsys):
    """Two `critiquelab run`s of `baseline` against endpoints that fail different problems."""
    spec = dict(limit=6, pool={"persist": False})
    children = []
    for wrong in ({"HumanEval/1"}, {"HumanEval/1", "HumanEval/2", "HumanEval/4"}):
        with FakeOpenAIServer(humaneval_responder(humaneval_problems, wrong=wrong)) as fake:
            # fresh, no cache: a reused port must not let the second run replay the first
            result = run(fake_spec(fake.api_base, **spec), progress=False, cache=False, fresh=True)
            children.append(result.children[0])

    result = compare_runs([c.run_id for c in children], home=home, n_resamples=999)
    labels = list(result.table["pipeline"])
    assert len(labels) == 2 and all(label.startswith("baseline@") for label in labels)  # clash resolved
    assert list(result.table["pass@1"]) == pytest.approx([5 / 6, 3 / 6])
    pair = result.pairs.iloc[0]
    assert (pair["pairs"], pair["only_a"], pair["only_b"], pair["mcnemar_p"]) == (6, 2, 0, 0.5)
    assert result.out_dir.name.startswith("cmp-")

    client = MlflowClient(tracking_uri(home))
    logged = client.get_run(result.logged_run_id)
    assert logged.data.tags[COMPARISON_TAG] == "true"
    assert result.logged_run_id not in {c.run_id for c in children}
    assert {"comparison/report.html", "comparison/summary.md"} <= {
        a.path for a in client.list_artifacts(result.logged_run_id, "comparison")}
    assert "mlflow.parentRunId" not in logged.data.tags  # never mistaken for a pipeline run

    out = home / "cli-report"
    assert main(["compare", children[0].run_id, children[1].run_id, "--home", str(home),
                 "--out", str(out), "--no-log", "--resamples", "199"]) == 0
    printed = capsys.readouterr().out
    assert "# Pipeline comparison" in printed and str(out / "report.html") in printed
    assert (out / "report.html").is_file()


def test_cli_unknown_run_id_is_one_line_exit_2(home, capsys):
    _synthetic_experiment(home)
    assert main(["--home", str(home), "compare", "0123456789abcdef"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("critiquelab: error: unknown run id '0123456789abcdef'") and "\n" not in err
    assert main(["compare", "nope", "--home", str(home / "empty")]) == 2
    assert "no MLflow store" in capsys.readouterr().err


def test_run_with_two_pipelines_ends_with_comparison(home, humaneval_problems, tmp_path, capsys):
    pipelines = [{"name": "baseline", "label": "first"}, {"name": "baseline", "label": "second"}]
    responder = humaneval_responder(humaneval_problems, wrong={"HumanEval/0"})
    with FakeOpenAIServer(responder) as fake:
        spec = fake_spec(fake.api_base, pipelines=pipelines, limit=3, pool={"persist": False})
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert main(["--home", str(home), "run", str(path), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    parent = next(line.split()[3] for line in printed.splitlines() if line.startswith("MLflow parent run"))
    assert (home / "reports" / parent / "report.html").is_file()
    assert "| first | 1 | 3 | 0.6667 |" in printed and "| first | second | 3 |" in printed


def _experiment(home, outcomes):
    """One seed per pipeline, ``outcomes`` = label -> passed per problem, under one parent."""
    tracker = Tracker(home, "extremes")
    parent = tracker.start_run("extremes")
    for label, passed in outcomes.items():
        run_id = tracker.start_run(f"{label}-seed0", parent_id=parent)
        tracker.log_params(run_id, {"pipeline": label, "pipeline.label": label, "seed": 0})
        results = [ProblemResult(task_id=f"T/{i}", pipeline=label, seed=0, prompt_tokens=100,
                                 completion_tokens=50, lm_calls=1,
                                 status=Status.PASSED if p else Status.FAILED)
                   for i, p in enumerate(passed)]
        tracker.log_frame(run_id, results_table(results), "problems")
        tracker.finish(run_id)
    tracker.finish(parent)
    return parent


@pytest.mark.parametrize("problems", [20, 25])
def test_compare_all_passed_against_all_failed(home, capsys, problems):
    """Issue #21: n of n passed put the Wilson bound at 0.9999999999999999, below pass@1 (0 of n:
    5.6e-17, above it), and the pass@1 plot raised, taking `run` and `optimize`'s held-out step
    down with it. Which n depends on rounding: 20 is the issue's example, 25 fails both ways here."""
    parent = _experiment(home, {"perfect": [True] * problems, "broken": [False] * problems,
                                "half": [True, False] * (problems // 2) + [True] * (problems % 2)})
    result = compare_runs(parent, home=home, n_resamples=999)

    table = result.table.set_index("pipeline")
    assert table.loc["perfect", "ci_high"] == 1.0 and 0.8 < table.loc["perfect", "ci_low"] < 1.0
    assert table.loc["broken", "ci_low"] == 0.0 and 0.0 < table.loc["broken", "ci_high"] < 0.2
    assert ((table["ci_low"] <= table["pass@1"]) & (table["pass@1"] <= table["ci_high"])).all()
    pairs = result.pairs.set_index(["a", "b"])
    extreme = pairs.loc[("perfect", "broken")]
    # Every pair discordant the same way: the bootstrap has nothing to vary, McNemar carries it.
    assert (extreme["difference"], extreme["ci_low"], extreme["ci_high"]) == (1.0, 1.0, 1.0)
    assert extreme["mcnemar_p"] == pytest.approx(2 / 2**problems)
    half = pairs.loc[("perfect", "half")]
    assert 0.0 < half["ci_low"] < half["difference"] < half["ci_high"] <= 1.0
    assert (pairs["ci_low"].between(-1, 1) & pairs["ci_high"].between(-1, 1)).all()
    for key in ("pass_plot", "cost_plot", "html"):
        assert result.files[key].stat().st_size > 0
    assert f"| perfect | 1 | {problems} | 1 | [0.8" in result.markdown
    # These runs name no registered pipeline: the common metrics only, and the report says so.
    unregistered = "perfect: pipeline 'perfect' is not registered here; only the metrics every pipeline has"
    assert f"{unregistered} are shown" in result.notices

    assert main(["--home", str(home), "compare", parent, "--no-log", "--out", str(home / "cli")]) == 0
    printed = capsys.readouterr().out
    assert f"| broken | 1 | {problems} | 0 | [0, 0.1" in printed
    assert f"| perfect | broken | {problems} | 1 | 0 | 1 | [1, 1] | {problems} | 0 |" in printed


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--resamples", "0", "--resamples must be an integer from 99 to 1000000"),
        ("--resamples", "98", "--resamples must be an integer from 99 to 1000000"),
        ("--resamples", "1000001", "--resamples must be an integer from 99 to 1000000"),
        ("--bootstrap-seed", "-1", "--bootstrap-seed must be an integer from 0 to 4294967295"),
        ("--bootstrap-seed", str(2**32), "--bootstrap-seed must be an integer from 0 to 4294967295"),
        ("--viewer-url", "ftp://127.0.0.1:8470", "--viewer-url must be an http(s) URL"),
        ("--viewer-url", "127.0.0.1:8470", "--viewer-url must be an http(s) URL"),
        ("--viewer-url", "http://", "--viewer-url must be an http(s) URL"),
        ("--viewer-url", "http://[::1", "--viewer-url must be an http(s) URL"),  # urlsplit raises
    ],
)
def test_cli_compare_options_out_of_range_are_one_line_exit_2(home, capsys, flag, value, expected):
    out = home / "report"
    assert main(["--home", str(home), "compare", "0123456789abcdef", flag, value, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"critiquelab: error: {expected}") and f"got {value}" in err and "\n" not in err
    assert not out.exists() and not (home / "mlflow.db").exists()  # checked before anything is read


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (dict(n_resamples=0), "n_resamples"),
        (dict(bootstrap_seed=-1), "bootstrap_seed"),
        (dict(bootstrap_seed=2**32), "bootstrap_seed"),
        (dict(confidence=1.0), "confidence"),
        (dict(confidence=0.0), "confidence"),
        (dict(viewer_url="file:///tmp/view"), "viewer_url"),
    ],
)
def test_compare_runs_checks_its_options_first(home, options, named):
    with pytest.raises(UserError, match=f"^{named} must be"):
        compare_runs("0123456789abcdef", home=home, **options)


def test_compare_across_parents_names_what_differs_in_how_the_runs_were_made(home, humaneval_problems,
                                                                             capsys):
    """Two experiments that differ in temperature: the comparison says so on screen and in the
    report; two made the same way say nothing."""
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        made = {}
        for name, temperature in (("cold", 0.0), ("cold_again", 0.0), ("warm", 0.7)):
            spec = fake_spec(fake.api_base, limit=2, pool={"persist": False})
            spec["model"]["temperature"] = temperature
            made[name] = run(spec, progress=False, cache=False, fresh=True).children[0].run_id

    same = compare_runs([made["cold"], made["cold_again"]], home=home, n_resamples=99, log=False)
    assert not [n for n in same.notices if "were made with different" in n]

    assert main(["compare", made["cold"], made["warm"], "--home", str(home), "--no-log",
                 "--resamples", "99"]) == 0
    printed = capsys.readouterr()
    shown = printed.out + printed.err
    assert "different config.model.temperature: 0.0" in shown and "0.7" in shown
    differ = compare_runs([made["cold"], made["warm"]], home=home, n_resamples=99, log=False)
    [notice] = [n for n in differ.notices if "were made with different" in n]
    assert "config.model.temperature" in notice
    assert notice in differ.files["markdown"].read_text()


def test_a_notice_shows_where_long_values_differ():
    from critiquelab.experiments.tracking.compare_provenance import _shown

    assert _shown(["http://gpu-host.internal:8081/v1", "http://gpu-host.internal:8082/v1"]) == [
        "…rnal:8081/v1", "…rnal:8082/v1"]
    assert _shown(["0.0", "0.7"]) == ["0.0", "0.7"]  # short values as they are
    first, second = _shown(["sqlite:///data/home-one/mlflow.db", "sqlite:///data/home-two/mlflow.db"])
    assert first != second and "one" in first and "two" in second
    # Nothing shared: each value from its start to its end (it was cut to '/tmp/pytest-of-r…').
    path = "/tmp/pytest-of-root/pytest-42/test_x0/data/two.jsonl"
    assert _shown(["humaneval", path]) == ["humaneval", "/tmp/pytest-of-root/pyt…/test_x0/data/two.jsonl"]
    # A long differing part is shortened in its middle, both of its ends kept.
    one, _ = _shown(["a" * 40 + "-one-" + "b" * 40, "c" * 40 + "-two-" + "d" * 40])
    assert one.startswith("aaaa") and one.endswith("bbbb") and "…" in one and len(one) == 47


def test_a_run_given_twice_is_refused_and_a_single_run_says_there_is_nothing_to_compare(home, capsys):
    parent = _synthetic_experiment(home)
    runs = MlflowClient(tracking_uri(home)).search_runs(
        [Tracker(home, "synthetic").experiment_id], filter_string="params.`pipeline.label` = 'baseline'")
    one = runs[0].info.run_id
    assert main(["compare", one, one, "--home", str(home), "--no-log"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [f"critiquelab: error: run id {one} is given more than once; compare the "
                                "runs once each"]
    single = compare_runs([one], home=home, n_resamples=99, log=False)
    assert any("nothing to compare it with" in n for n in single.notices)
    assert not any("nothing to compare" in n for n in compare_runs(parent, home=home, log=False,
                                                                  n_resamples=99).notices)
