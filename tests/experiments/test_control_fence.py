"""Positive controls are fenced: tagged and marked as controls, reported in a Controls block of
compare (never a headline row or pair), and refused with memory, by optimisation (as its pipeline
or as a trace source) and by export — each refusal one line, exit 2, nothing written."""

from __future__ import annotations

import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.tracking.store import Tracker, tracking_uri
from critiquelab.experiments.viewer.data import ViewerData
from critiquelab.optimizers.training_examples import runs_of_experiment
from critiquelab.pipelines.controls import CONTROL_TAG

CONTROL = {"name": "critic_loop", "label": "oracle",
           "params": {"max_iterations": 1, "control": "oracle_feedback"}}
MARKED = "oracle [control: oracle_feedback]"


def _one_line_exit_2(capsys, argv):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("critiquelab: error: "), captured.err
    assert not captured.out
    return err[0]


@pytest.fixture(scope="module")
def control_run(tmp_path_factory, humaneval_problems):
    """baseline, critic_loop and its oracle control on three scripted problems, compared."""
    home = tmp_path_factory.mktemp("control") / "home"
    pipelines = [{"name": "baseline"}, {"name": "critic_loop", "params": {"max_iterations": 1}}, CONTROL]
    with pytest.MonkeyPatch.context() as patch, \
            FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        patch.setenv("CRITIQUELAB_HOME", str(home))
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=3), progress=False)
    return home, result


def test_a_control_run_is_tagged_and_reported_only_in_the_controls_block(control_run):
    home, result = control_run
    client = MlflowClient(tracking_uri(home))
    tags = {c.pipeline: client.get_run(c.run_id).data.tags for c in result.children}
    assert tags["oracle"][CONTROL_TAG] == "oracle_feedback"
    assert CONTROL_TAG not in tags["critic_loop"] and CONTROL_TAG not in tags["baseline"]

    comparison = result.comparison
    assert list(comparison.table["pipeline"]) == ["baseline", "critic_loop"]
    assert list(comparison.controls["pipeline"]) == [MARKED]
    assert not {*comparison.pairs["a"], *comparison.pairs["b"]} & {MARKED, "oracle"}
    headline, _, controls = comparison.markdown.partition("## Controls")
    assert "oracle" not in headline.split("## Runs")[0]  # no headline row or pair names it
    assert MARKED in controls and "Positive controls see the hidden tests" in controls
    html = comparison.files["html"].read_text()
    assert 'id="controls"' in html and "oracle [control: oracle_feedback]" in html
    assert "oracle" not in (comparison.out_dir / "pipelines.csv").read_text()
    assert MARKED in (comparison.out_dir / "controls.csv").read_text()
    pairs = (comparison.out_dir / "control_pairs.csv").read_text()
    assert pairs.count(MARKED) == 2  # against baseline and against its own arm
    assert list(result.summary()["pipeline"]) == ["baseline", "critic_loop", MARKED]  # run's printed table
    viewed = {run.run_id: run.label for run in ViewerData(tracking_uri(home)).runs()}
    assert {viewed[c.run_id] for c in result.children} == {"baseline", "critic_loop", MARKED}


def test_an_experiment_s_control_runs_are_never_collected_as_traces(control_run):
    home, result = control_run
    collected = set(runs_of_experiment(tracking_uri(home), "test-experiment"))
    assert collected == {c.run_id for c in result.children if c.pipeline != "oracle"}


def test_a_control_run_is_refused_as_a_trace_source_before_anything_is_written(control_run, tmp_path,
                                                                               capsys, monkeypatch):
    home, result = control_run
    monkeypatch.setenv("CRITIQUELAB_HOME", str(home))
    oracle = next(c.run_id for c in result.children if c.pipeline == "oracle")
    spec = tmp_path / "opt.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "opt-from-control", "pipeline": {"name": "critic_loop"}, "optimizer": {"name": "traces"},
        "traces": {"run_ids": [oracle]}, "split": {"seed": 1, "train": 3, "val": 2},
        "dataset": {"source": "humaneval", "limit": 7},
        "model": {"id": "openai/fake", "api_base": "http://127.0.0.1:9/v1", "num_retries": 0},
    }))
    before = sorted(p.relative_to(home) for p in home.rglob("*") if "mlflow.db" not in p.name)
    line = _one_line_exit_2(capsys, ["optimize", str(spec)])
    assert line.endswith(f"{spec}: run {oracle} is the oracle_feedback control: its prompts carry "
                         "hidden-test text, so it is refused as a trace source")
    assert sorted(p.relative_to(home) for p in home.rglob("*") if "mlflow.db" not in p.name) == before
    assert MlflowClient(tracking_uri(home)).get_experiment_by_name("opt-from-control") is None


def test_a_control_run_is_refused_by_export(home, tmp_path, capsys):
    tracker = Tracker(home, "controls")
    run_id = tracker.start_run("oracle")
    tracker.set_tags(run_id, {CONTROL_TAG: "oracle_feedback"})
    tracker.finish(run_id)
    line = _one_line_exit_2(capsys, ["export", run_id, "--out", str(tmp_path / "out")])
    assert line == (f"critiquelab: error: run {run_id} is the oracle_feedback control: its prompts carry "
                    "hidden-test text, so it is refused as an export")
    assert not (tmp_path / "out").exists()


def test_a_control_with_memory_is_refused(tmp_path, home, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "x", "pipelines": [{**CONTROL, "memory": {"enabled": True}}]}))
    line = _one_line_exit_2(capsys, ["run", str(spec)])
    assert line.endswith("pipeline 'critic_loop': params.control: the oracle_feedback control is refused "
                         "with memory: its prompts carry hidden-test text, which must never enter a "
                         "memory store")
    assert not home.exists()


def test_an_optimisation_of_a_control_is_refused(tmp_path, home, capsys):
    spec = tmp_path / "opt.yaml"
    spec.write_text(yaml.safe_dump({"name": "opt", "pipeline": CONTROL}))
    line = _one_line_exit_2(capsys, ["optimize", str(spec)])
    assert line.endswith("pipeline 'critic_loop': params.control: the oracle_feedback control cannot be "
                         "optimised: its prompts carry hidden-test text, which must never reach a "
                         "compiled program")
    assert not home.exists()
