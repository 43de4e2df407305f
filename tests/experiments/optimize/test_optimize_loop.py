"""`critiquelab optimize`: split → baseline → compile → validate → gate → test, every step an
MLflow run, and a re-run skips finished steps."""

import json
import logging
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_of, role_responder

from critiquelab.experiments.api import export, optimize
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.tracking.store import tracking_uri


def _spec(tmp_path, api_base):
    spec = {
        "name": "opt-test",
        "pipeline": {"name": "critic_loop", "params": {"max_iterations": 2}},
        "optimizer": {"name": "bootstrap", "params": {"max_bootstrapped_demos": 2}},
        "split": {"seed": 1, "train": 3, "val": 2},
        "dataset": {"source": "humaneval", "limit": 7},
        "model": {"id": "openai/fake", "api_base": api_base, "num_retries": 0},
    }
    path = tmp_path / "opt.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_optimize_runs_every_step_logs_them_and_resumes(tmp_path, home, humaneval_problems):
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        path = _spec(tmp_path, fake.api_base)
        result = optimize(path, home=home)
        calls = fake.completions
        again = optimize(path, home=home, cache=False)  # no cache: only skipped steps avoid LM calls
        assert fake.completions == calls

    split = result.split
    assert (len(split["train"]), len(split["val"]), len(split["test"])) == (3, 2, 2)
    assert not set(split["test"]) & (set(split["train"]) | set(split["val"]))
    assert set(result.steps) == {"baseline_val", "compile", "compiled_val", "gate", "test"}
    test = result.steps["test"]
    assert set(test["scores"]) == set(split["test"])
    # The held-out test is one experiment run pairing unoptimised and kept program, with compare's table.
    test_children = {c.label: c for c in _children(home, test["experiment_run_id"])}
    expected = {"critic_loop", f"critic_loop+{result.kept}"} if result.kept != "baseline" else {"critic_loop"}
    assert set(test_children) == expected
    for child in test_children.values():
        assert {r.task_id for r in child.results} == set(split["test"])
    if result.kept != "baseline":
        assert "McNemar" in test["comparison"] and f"critic_loop+{result.kept}" in test["comparison"]
    assert result.steps["compile"]["demos"] > 0
    assert result.kept in ("compiled", "baseline")
    assert again.parent_run_id == result.parent_run_id and again.steps == result.steps

    client = MlflowClient(tracking_uri(home))
    children = client.search_runs(
        [client.get_experiment_by_name("opt-test").experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{result.parent_run_id}'",
    )
    assert sorted(r.info.run_name for r in children) == ["baseline_val", "compile", "compiled_val", "test"]
    compile_run = result.steps["compile"]["run_id"]
    assert client.get_run(compile_run).data.params["optimizer"] == "bootstrap"
    history = client.get_metric_history(result.parent_run_id, "val_pass_at_1")
    assert sorted(m.step for m in history) == [0, 1]
    parent = client.get_run(result.parent_run_id)
    assert parent.data.params["split.sizes"] == "3/2/2"

    exported = export(compile_run, formats=["json", "md"], out=tmp_path / "exp", home=home)
    assert Path(exported["files"][0]).name == "program.json"
    state = json.loads((tmp_path / "exp" / "program.json").read_text())
    # The fixer's good fixes are demos; the coder's first drafts all failed, so none of them is.
    assert state["fixer"]["demos"] and not state["coder"]["demos"]
    held_out = [p for p in humaneval_problems if p.task_id in split["test"]]
    assert held_out and not any(json.dumps(p.prompt)[1:-1] in json.dumps(state) for p in held_out)


def _children(home, parent_run_id):
    from dataclasses import dataclass

    import pandas as pd

    @dataclass
    class Child:
        label: str
        results: list

    client = MlflowClient(tracking_uri(home))
    parent = client.get_run(parent_run_id)
    runs = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'"
    )
    children = []
    for run in runs:
        frame = pd.read_parquet(client.download_artifacts(run.info.run_id, "problems.parquet"))
        children.append(Child(run.data.params["pipeline.label"], list(frame.itertuples())))
    return children


# Each bad spec: (change to a good spec, what the one line must say). All are refused before
# anything runs: the endpoint below does not exist, so any LM call would be a different error.
BAD_SPECS = {
    "misspelled optimiser parameter": (
        {"optimizer": {"name": "bootstrap", "params": {"max_bootstraped_demos": 2}}},
        "optimizer.params: optimizer 'bootstrap': params.max_bootstraped_demos: unknown field; "
        "allowed: max_bootstrapped_demos, max_rounds",
    ),
    "parameter of another optimiser": (
        {"optimizer": {"name": "traces", "params": {"max_bootstrapped_demos": 2}}},
        "optimizer 'traces': params.max_bootstrapped_demos: unknown field; allowed: k",
    ),
    "mipro budget set twice": (
        {"optimizer": {"name": "mipro", "params": {"auto": "light", "num_trials": 9}}},
        "optimizer 'mipro': params: num_trials only apply with auto: null",
    ),
    "gepa budget set twice": (
        {"optimizer": {"name": "gepa", "params": {"auto": "light", "max_metric_calls": 9}}},
        "optimizer 'gepa': params: set auto or max_metric_calls, not both",
    ),
    "wrong parameter type": (
        {"optimizer": {"name": "bootstrap", "params": {"max_rounds": "many"}}},
        "optimizer 'bootstrap': params.max_rounds: expected an integer, got 'many'",
    ),
    "unknown optimiser": ({"optimizer": {"name": "sgd"}}, "optimizer.name"),
    "misspelled refine role": (
        {"refine": {"role": "critc"}},
        "refine.role: 'critc' is not a role of pipeline 'critic_loop'; its roles: coder, critic, fixer",
    ),
    "trace sources the optimiser ignores": (
        {"traces": {"run_ids": ["abc"]}}, "traces: only the 'traces' optimizer reads pool traces",
    ),
    "teacher nothing uses": (
        {"optimizer": {"name": "traces"}, "teacher": {"id": "local-1.5b"}}, "teacher: unused",
    ),
    "teacher that is no model": ({"teacher": {"id": "gpt4"}}, "teacher: model 'gpt4'"),
    "no validation part": (
        {"split": {"seed": 1, "train": 3, "val": 0}}, "split.val: a count must be at least 1 (got 0)",
    ),
    "a boolean seed": ({"split": {"seed": True}}, "split.seed: expected an integer, got true"),
    "a negative seed": ({"split": {"seed": -1}}, "split.seed: must be >= 0 (got -1)"),
    "a seed past 2**31 - 1": ({"split": {"seed": 2**31}},
                              "split.seed: must be <= 2147483647 (got 2147483648)"),
    "a fraction written as text": (
        {"split": {"val": "0.25"}}, "split.val: expected a count (a whole number, at least 1) or a fraction",
    ),
    "overlap allowed as text": ({"split": {"allow_overlap": "yes"}},
                                "split.allow_overlap: expected true or false, got 'yes'"),
    "a size that is neither count nor fraction": (
        {"split": {"train": 1.5}}, "split.train: a fraction must be between 0 and 1, exclusive (got 1.5)",
    ),
    "no test part": (
        {"split": {"seed": 1, "train": 6, "val": 0.1}},
        "split: 7 problems with train=6, val=0.1 give 6/1/0 train/validation/test problems; "
        "test would be empty",
    ),
    "validation part empty after the dataset limit": (
        {"split": {"seed": 1, "train": 3, "val": 2}, "dataset": {"source": "humaneval", "limit": 3}},
        "give 3/0/0 train/validation/test problems; validation and test would be empty",
    ),
    "held-out test half overlapping train and val": (
        {"split": {"seed": 1, "train": 3, "val": 2, "test": "test_half"}},
        "problem(s) to score were used to optimise the program (HumanEval/",  # dataset.split: all
    ),
    "a trace source run given twice": (
        {"optimizer": {"name": "traces"}, "traces": {"run_ids": ["r1", "r1"]}},
        "traces.run_ids: run 'r1' given more than once",
    ),
    "a trace source experiment where no store is": (
        {"optimizer": {"name": "traces"}, "traces": {"experiment": "nosuch"}},
        "traces.experiment: experiment 'nosuch': no MLflow store at",
    ),
    "unknown test source": (
        {"split": {"test": "half"}}, "split.test: must be one of rest, test_half (got 'half')"),
    "fraction leaving no validation problem": (
        {"split": {"seed": 1, "train": 0.6, "val": 0.05}},
        "give 4/0/3 train/validation/test problems; validation would be empty",
    ),
}


@pytest.mark.parametrize("change, expected", BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_bad_optimize_specs_are_one_line_exit_2_before_anything_is_written(
    tmp_path, home, capsys, change, expected
):
    spec = {**yaml.safe_load(_spec(tmp_path, "http://127.0.0.1:9/v1").read_text()), **change}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["optimize", str(path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"critiquelab: error: {path}: "), captured.err
    assert expected in err[0]
    assert not captured.out
    # No MLflow store, no optimisation directory: at most the dataset cache of a split check.
    written = {p.name for p in home.iterdir()} if home.exists() else set()
    assert written <= {"datasets"}, written


@pytest.mark.parametrize("refusal", ["a dead endpoint", "a dead teacher endpoint",
                                     "an unreachable tracking server",
                                     "a dead endpoint with a detected dataset format"])
def test_a_refused_optimize_start_writes_nothing(
    refusal, tmp_path, home, capsys, caplog, humaneval_problems
):
    """Every endpoint a step still to run will ask (the teacher's too) and the tracking are checked
    before the first file and the first step's line: no mlflow.db, split.json or steps/ — and no
    other line (a detected dataset format is told only once the start stands)."""
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        spec = yaml.safe_load(_spec(tmp_path, fake.api_base).read_text())
        if refusal.startswith("a dead endpoint"):
            spec["model"]["api_base"] = "http://127.0.0.1:9/v1"
        if refusal.endswith("a detected dataset format"):  # a file without dataset.format
            rows = tmp_path / "problems.jsonl"
            rows.write_text("".join(json.dumps(p.model_dump()) + "\n" for p in humaneval_problems[:7]))
            spec["dataset"] = {"source": str(rows)}
        elif refusal == "a dead teacher endpoint":
            spec["teacher"] = {"id": "openai/teacher", "api_base": "http://127.0.0.1:9/v1", "num_retries": 0}
        else:
            spec["tracking"] = {"uri": "http://127.0.0.1:9"}
        path = tmp_path / "refused.yaml"
        path.write_text(yaml.safe_dump(spec))
        with caplog.at_level(logging.WARNING):  # a logged line would print beside the error
            assert main(["optimize", str(path)]) == 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("critiquelab: error: "), captured.err
    assert "127.0.0.1:9" in err[0] and not captured.out
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.exists() else []
    assert set(written) <= {"datasets"}, written


def test_a_trace_source_experiment_the_store_lacks_is_refused_before_any_step(tmp_path, home, capsys):
    from critiquelab.experiments.tracking.store import Tracker

    Tracker(home, "some-other-experiment")  # a store that exists, without the experiment named
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    spec = {**yaml.safe_load(_spec(tmp_path, "http://127.0.0.1:9/v1").read_text()),
            "optimizer": {"name": "traces"}, "traces": {"experiment": "nosuch"}}
    path = tmp_path / "traces.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["optimize", str(path)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"critiquelab: error: {path}: traces.experiment: no MLflow experiment named "
                           "'nosuch'"), line
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    assert MlflowClient(tracking_uri(home)).get_experiment_by_name("opt-test") is None


def _fixer_worse_with_demos(problems):
    """The critic loop's scripts, except that a fixer shown demos writes wrong code: compiling
    (BootstrapFewShot adds demos) makes the program worse on validation."""
    scripted = role_responder(critic_loop_scripts(problems))

    def respond(messages):
        if role_of(messages) == "fixer" and len(messages) > 2:  # demos are extra user/assistant turns
            problem = next(p for p in problems if p.prompt.strip() in messages[-1]["content"])
            return f"```python\n{problem.prompt}    return None\n```"
        return scripted(messages)

    return respond


def _runs_named(home, experiment, name):
    client = MlflowClient(tracking_uri(home))
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id],
                              filter_string=f"attributes.run_name = '{name}'")
    return [r.info.run_id for r in runs]


def test_export_hint_names_the_run_holding_the_kept_program(tmp_path, home, humaneval_problems, capsys):
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        assert main(["optimize", str(_spec(tmp_path, fake.api_base))]) == 0
    out, err = capsys.readouterr()
    (compile_run,) = _runs_named(home, "opt-test", "compile")
    assert "kept compiled (validation pass@1 " in out
    # the held-out test shows a progress bar per program on stderr, as `critiquelab run` does
    assert "critic_loop seed=0:" in err and "critic_loop+compiled seed=0:" in err
    assert f"export the kept (compiled) program with: critiquelab export {compile_run}" in out
    assert main(["export", compile_run, "--out", str(tmp_path / "kept")]) == 0  # the hint works


def test_when_the_gate_keeps_the_baseline_nothing_is_offered_as_optimised(
    tmp_path, home, humaneval_problems, capsys, caplog
):
    with FakeOpenAIServer(_fixer_worse_with_demos(humaneval_problems)) as fake:
        path = _spec(tmp_path, fake.api_base)
        spec = yaml.safe_load(path.read_text())  # the same 7 problems, from a file without dataset.format
        rows = tmp_path / "problems.jsonl"
        rows.write_text("".join(json.dumps(p.model_dump()) + "\n" for p in humaneval_problems[:7]))
        path.write_text(yaml.safe_dump({**spec, "dataset": {"source": str(rows)}}))
        with caplog.at_level(logging.WARNING):
            assert main(["optimize", str(path)]) == 0
    notices = [r.getMessage() for r in caplog.records if "read as format 'humaneval'" in r.getMessage()]
    # told once the start stands (once for both halves), and again by the held-out test's own run
    assert len(notices) == 2 and notices[0] == notices[1], notices
    out = capsys.readouterr().out
    (compile_run,) = _runs_named(home, "opt-test", "compile")
    assert "kept baseline (validation pass@1 dropped: " in out
    assert "export the kept" not in out
    assert ("kept the unoptimised pipeline: nothing optimised to export (rejected candidates, should you "
            f"want one anyway: compiled: critiquelab export {compile_run})") in out
    client = MlflowClient(tracking_uri(home))
    (parent,) = _runs_named(home, "opt-test", "opt-test")
    tags = client.get_run(parent).data.tags
    assert tags["critiquelab.kept"] == "baseline"
    assert tags["critiquelab.gate"].startswith("validation pass@1 dropped")
    assert "program" not in {a.path for a in client.list_artifacts(parent)}


def test_train_and_val_from_the_dev_half_test_on_the_test_half(tmp_path, home, humaneval_problems):
    """`dataset.split: dev` + `split.test: test_half`: train/val drawn from the even-numbered
    problems, the held-out test is the odd-numbered half (`limit` selecting within each half),
    and the held-out experiment runs it as `dataset.split: test`."""
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        spec = yaml.safe_load(_spec(tmp_path, fake.api_base).read_text())
        spec["dataset"] = {"source": "humaneval", "split": "dev", "limit": 5}
        spec["split"] = {"seed": 1, "train": 3, "val": 2, "test": "test_half"}
        path = tmp_path / "halves.yaml"
        path.write_text(yaml.safe_dump(spec))
        result = optimize(path, home=home)
    dev = {f"HumanEval/{i}" for i in (0, 2, 4, 6, 8)}
    assert set(result.split["train"]) | set(result.split["val"]) == dev
    assert result.split["test"] == [f"HumanEval/{i}" for i in (1, 3, 5, 7, 9)]
    assert set(result.steps["test"]["scores"]) == set(result.split["test"])
    client = MlflowClient(tracking_uri(home))
    held_out = client.get_run(result.steps["test"]["experiment_run_id"])
    assert held_out.data.params["dataset.split"] == "test"
