"""Kill a two-pipeline run with SIGKILL at each step, run the same command again: exit 0, one
child run per pipeline × seed, the table of an uninterrupted run, the comparison once, and a
child that finished before the kill left exactly as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec

from critiquelab.experiments.tracking.store import CHILD_TAG, PARENT_TAG, RESULTS_TAG, Tracker, tracking_uri

ROOT = Path(__file__).parents[2]
KILL_AT = ROOT / "tests" / "support" / "kill_at.py"
PIPELINES = [{"name": "baseline"}, {"name": "vote", "params": {"k": 2}}]
APPEND = "critiquelab.experiments.checkpoints:CheckpointStore.append"
# (point, occurrence, match, before, whether the first pipeline's child had finished)
KILL_POINTS = {
    "during the first pipeline": (APPEND, 2, "pipeline='baseline'", False, False),
    "between the two pipelines": ("critiquelab.experiments.tracking.store:Tracker.finish", 1, "", False,
                                  True),
    "during the later pipeline": (APPEND, 1, "pipeline='vote'", False, True),
    "while logging artifacts": (
        "critiquelab.experiments.tracking.store:Tracker.log_text", 1, "messages.jsonl", True, False),
    "during the final comparison": ("critiquelab.eval.report:write_report", 1, "", False, True),
}


@pytest.fixture(scope="module")
def endpoint(humaneval_problems):
    responder = humaneval_responder(humaneval_problems, wrong={"HumanEval/1"})
    with FakeOpenAIServer(responder) as fake:
        yield fake


@pytest.fixture(scope="module")
def spec_path(endpoint, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    spec = fake_spec(endpoint.api_base, pipelines=PIPELINES, pool={"persist": False})
    path.write_text(yaml.safe_dump(spec))
    return path


def _critiquelab(home: Path, spec: Path, *prefix: str) -> subprocess.CompletedProcess:
    # The checkout under test first: kill_at.py runs as a script, which would otherwise import
    # whatever copy of the package the environment has installed.
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "CRITIQUELAB_HOME": str(home), "PYTHONPATH": path}
    command = [sys.executable, *prefix, "--", "run", str(spec), "--no-progress"]
    if not prefix:
        command = [sys.executable, "-m", "critiquelab.experiments.cli", "run", str(spec), "--no-progress"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def _table(stdout: str) -> str:
    """The summary table the command prints (before the parent run line)."""
    return stdout.split("\nMLflow parent run")[0]


def _runs(home: Path) -> tuple[list, dict[str, list]]:
    tracker = Tracker(home, "test-experiment")
    runs = tracker.runs_tagged({})
    parents = [r for r in runs if PARENT_TAG not in r.data.tags]
    children: dict[str, list] = {}
    for run in runs:
        if PARENT_TAG in run.data.tags:
            key = f"{run.data.params['pipeline.label']}/{run.data.params['seed']}"
            children.setdefault(key, []).append(run)
    return parents, children


@pytest.fixture(scope="module")
def straight(spec_path, tmp_path_factory) -> tuple[Path, str]:
    home = tmp_path_factory.mktemp("straight")
    done = _critiquelab(home, spec_path)
    assert done.returncode == 0, done.stderr
    return home, done.stdout


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_then_same_command_matches_uninterrupted_run(point, straight, spec_path, tmp_path):
    target, occurrence, match, before, first_finished = KILL_POINTS[point]
    home = tmp_path / "home"
    prefix = [str(KILL_AT), target, str(occurrence), "--match", match, *(["--before"] if before else [])]
    killed = _critiquelab(home, spec_path, *prefix)
    assert killed.returncode == -9, f"not killed at {point}: rc {killed.returncode}\n{killed.stderr}"

    _, before_children = _runs(home)
    first = before_children.get("baseline/0", [None])[0]
    if first_finished:
        assert first.info.status == "FINISHED"
        first_metrics = MlflowClient(tracking_uri(home)).get_metric_history(first.info.run_id, "pass_at_1")

    resumed = _critiquelab(home, spec_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _table(resumed.stdout) == _table(straight[1])

    parents, children = _runs(home)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(children) == ["baseline/0", "vote/0"]
    assert all(len(runs) == 1 for runs in children.values()), {k: len(v) for k, v in children.items()}
    client = MlflowClient(tracking_uri(home))
    straight_client = MlflowClient(tracking_uri(straight[0]))
    _, straight_children = _runs(straight[0])
    for key, (run,) in children.items():
        assert run.info.status == "FINISHED" and run.data.tags[RESULTS_TAG]
        ours = pd.read_parquet(client.download_artifacts(run.info.run_id, "problems.parquet"))
        theirs = pd.read_parquet(
            straight_client.download_artifacts(straight_children[key][0].info.run_id, "problems.parquet")
        )
        columns = ["task_id", "status", "reason", "passed", "prompt_tokens", "completion_tokens"]
        pd.testing.assert_frame_equal(ours[columns], theirs[columns])
        assert len(client.get_metric_history(run.info.run_id, "pass_at_1")) == 1
    if first_finished:  # left exactly as it was
        (again,) = children["baseline/0"]
        assert again.info.run_id == first.info.run_id and again.info.end_time == first.info.end_time
        assert client.get_metric_history(first.info.run_id, "pass_at_1") == first_metrics
    parent = parents[0].info.run_id
    logged = sorted(a.path for a in client.list_artifacts(parent, "comparison"))
    straight_parent = _runs(straight[0])[0][0].info.run_id
    assert logged and logged == sorted(
        a.path for a in straight_client.list_artifacts(straight_parent, "comparison")
    )
    tables = [
        pd.read_csv(c.download_artifacts(p, "comparison/pipelines.csv"))
        for c, p in ((client, parent), (straight_client, straight_parent))
    ]
    pd.testing.assert_frame_equal(*tables)


def test_compare_picks_the_most_complete_of_duplicate_child_runs(home, capsys):
    """Data directories from before resume reused child runs can hold two runs of one
    pipeline × seed under a parent: compare takes the most complete and says so in one line; a
    pipeline of an interrupted parent with no finished run is named in a line too."""
    from critiquelab.eval.results import ProblemResult, results_table
    from critiquelab.eval.verdict import Status
    from critiquelab.experiments.cli.main import main

    tracker = Tracker(home, "old")
    parent = tracker.start_run("old")
    ids = {}
    for label, count in (("baseline", 2), ("baseline", 4), ("critic", 4)):
        run_id = tracker.start_run(f"{label}-seed0", parent_id=parent)
        pipeline = "critic_loop" if label == "critic" else label  # registered: compare reads its figures
        tracker.log_params(run_id, {"pipeline": pipeline, "pipeline.label": label, "seed": 0})
        results = [ProblemResult(task_id=f"T/{i}", pipeline=label, seed=0, status=Status.PASSED)
                   for i in range(count)]
        tracker.log_metrics(run_id, {"problems": count})
        tracker.log_frame(run_id, results_table(results), "problems")
        tracker.finish(run_id)
        ids[(label, count)] = run_id
    interrupted = tracker.start_run("debate-seed0", parent_id=parent, tags={CHILD_TAG: "debate/seed=0"})
    tracker.finish(interrupted, "KILLED")  # a pipeline that never finished is named, not dropped
    tracker.finish(parent)

    assert main(["--home", str(home), "compare", parent, "--resamples", "99"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "2 runs of baseline/seed=0" in err[0] and ids[("baseline", 4)] in err[0]
    assert "debate/seed=0 has no finished run (KILLED); left out" in err[1]
    report = (home / "reports" / parent / "summary.md").read_text()  # logged with the report too
    assert "2 runs of baseline/seed=0" in report and "| baseline | 1 | 4 |" in report
