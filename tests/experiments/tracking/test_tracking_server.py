"""A team's MLflow tracking server (a real `mlflow server` on 127.0.0.1): run, compare, export to
its Prompt Registry, run with prompts:/ URIs from it, and optimize all log there and nowhere
else; a server lost mid-run is one line and exit code 3."""

from __future__ import annotations

import json

import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.mlflow_server import MlflowServer
from support.role_responder import role_responder
from support.specs import fake_spec

from critiquelab.experiments.cli.main import main
from critiquelab.experiments.tracking.store import PARENT_TAG
from critiquelab.optimizers.export import export_program
from critiquelab.pipelines.registry import create_pipeline

TUNED = "TUNED: write the function, nothing else."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with MlflowServer(tmp_path_factory.mktemp("mlflow-server")) as running:
        yield running


def _runs(server, experiment):
    client = MlflowClient(server.uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment} on the server"
    return client, client.search_runs([found.experiment_id])


def test_run_and_compare_log_to_the_server(server, tmp_path, home, capsys, humaneval_problems):
    pipelines = [{"name": "baseline"}, {"name": "vote", "params": {"k": 2}}]
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = fake_spec(fake.api_base, pipelines=pipelines, pool={"persist": False},
                         tracking={"uri": server.uri}, name="on-server")
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert main(["run", str(path), "--no-progress"]) == 0, capsys.readouterr().err
    client, runs = _runs(server, "on-server")
    (parent,) = [r for r in runs if PARENT_TAG not in r.data.tags]
    assert sorted(r.data.params["pipeline.label"] for r in runs if PARENT_TAG in r.data.tags) == [
        "baseline", "vote"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "comparison")}
    assert "comparison/summary.md" in artifacts  # stored by the server, read back through it
    assert not (home / "mlflow.db").exists() and not (home / "mlartifacts").exists()
    assert (server.root / "artifacts").is_dir()
    capsys.readouterr()
    # compare and export reach the server through $MLFLOW_TRACKING_URI, as a team sets it.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLFLOW_TRACKING_URI", server.uri)
        assert main(["compare", parent.info.run_id, "--resamples", "99", "--no-log"]) == 0
    assert "| vote |" in capsys.readouterr().out


def test_prompt_registry_round_trip_on_the_server(server, tmp_path, home, capsys, humaneval_problems,
                                                  monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    program = create_pipeline("critic_loop")
    program.coder.signature = program.coder.signature.with_instructions(TUNED)
    export_program(program, tmp_path / "prog", pipeline="critic_loop", formats=["json"], source="t")
    assert main(["export", str(tmp_path / "prog"), "--format", "mlflow", "--prefix", "team"]) == 0
    assert "MLflow prompt team.coder version 1" in capsys.readouterr().out
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=2, pool={"persist": False})))
        assert main(["run", str(path), "--no-progress", "--prompts", "prompts:/team.coder/1"]) == 0
        requests = [json.dumps(r["messages"]) for r in fake.requests if "messages" in r]
    assert sum(TUNED in r for r in requests) == 2  # both problems' coder calls
    assert not (home / "mlflow.db").exists()


def test_optimize_logs_every_step_to_the_server(server, tmp_path, home, capsys, humaneval_problems):
    spec = {
        "name": "opt-on-server",
        "pipeline": {"name": "critic_loop", "params": {"max_iterations": 2}},
        "optimizer": {"name": "bootstrap", "params": {"max_bootstrapped_demos": 1}},
        "split": {"seed": 1, "train": 2, "val": 1},
        "dataset": {"source": "humaneval", "limit": 4},
        "tracking": {"uri": server.uri},
    }
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        spec["model"] = {"id": "openai/fake", "api_base": fake.api_base, "num_retries": 0}
        path = tmp_path / "opt.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert main(["optimize", str(path)]) == 0, capsys.readouterr().err
    _, runs = _runs(server, "opt-on-server")
    names = sorted(r.info.run_name for r in runs if PARENT_TAG in r.data.tags)
    assert names == ["baseline_val", "compile", "compiled_val", "test"]
    _, tested = _runs(server, "opt-on-server-test")
    assert len(tested) == 3  # the held-out experiment: parent + unoptimised + compiled
    assert not (home / "mlflow.db").exists()


def test_a_server_lost_mid_run_is_one_line_exit_3(tmp_path, home, capsys, humaneval_problems):
    answer = humaneval_responder(humaneval_problems)
    with MlflowServer(tmp_path / "doomed") as doomed:
        seen = []

        def respond(messages):
            seen.append(1)
            if len(seen) == 3:  # the pre-flight, the first problem, then the server dies
                doomed.stop()
            return answer(messages)

        with FakeOpenAIServer(respond) as fake:
            spec = fake_spec(fake.api_base, limit=3, pool={"persist": False},
                             tracking={"uri": doomed.uri})
            path = tmp_path / "spec.yaml"
            path.write_text(yaml.safe_dump(spec))
            code = main(["run", str(path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 3, err
    (line,) = err.strip().splitlines()
    assert f"MLflow tracking store {doomed.uri} failed mid-run" in line
    assert "run the same command again" in line


def test_an_unreachable_server_at_start_is_bad_input(tmp_path, home, capsys, humaneval_problems):
    with MlflowServer(tmp_path / "never") as never:
        uri = never.uri
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = fake_spec(fake.api_base, limit=1, pool={"persist": False}, tracking={"uri": uri})
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert main(["run", str(path), "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert uri in line and "is not usable" in line
