"""`critiquelab optimize`: split → baseline → compile → validate → gate → test, every step an
MLflow run, and a re-run skips finished steps."""

import json
from pathlib import Path

import yaml
from conftest import critic_loop_scripts
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from experiments.api import export, optimize
from experiments.cli import main
from experiments.tracking import tracking_uri


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
    assert state["coder"]["demos"]
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


def test_optimize_spec_errors_are_one_line(tmp_path, home, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\npipeline: {name: critic_loop}\noptimizer: {name: sgd}\n")
    assert main(["optimize", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "optimizer.name" in err and len(err.splitlines()) == 1
