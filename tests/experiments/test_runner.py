"""The runner against a scripted OpenAI-compatible endpoint: MLflow logging, cache, resume."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import CHILD_TAG, PARENT_TAG, Tracker, tracking_uri


def test_run_logs_parent_and_child_runs(home, humaneval_problems):
    responder = humaneval_responder(humaneval_problems, wrong={"HumanEval/1"})
    with FakeOpenAIServer(responder) as fake:
        result = run(fake_spec(fake.api_base), progress=False)
    child = result.children[0]
    assert [r.task_id for r in child.results] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert [r.passed for r in child.results] == [True, False, True]
    assert child.results[1].reason == "assertion"
    assert child.metrics["pass_at_1"] == 2 / 3

    client = MlflowClient(tracking_uri(home))
    parent = client.get_run(result.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.params["model.resolved"] == "openai/fake"
    assert parent.data.params["version.dspy"]
    assert "git_commit" in parent.data.tags
    logged = client.get_run(child.run_id)
    assert logged.data.tags["mlflow.parentRunId"] == result.parent_run_id
    assert logged.data.metrics["pass_at_1"] == 2 / 3
    assert logged.data.metrics["prompt_tokens"] > 0
    artifacts = {a.path for a in client.list_artifacts(child.run_id)}
    assert {"problems.parquet", "problems.csv"} <= artifacts
    table = pd.read_parquet(client.download_artifacts(child.run_id, "problems.parquet"))
    assert len(table) == 3
    assert {"task_id", "status", "reason", "prompt_tokens", "latency_s", "final_code"} <= set(table)


def test_rerun_of_finished_experiment_makes_no_lm_call(home, humaneval_problems):
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        first = run(fake_spec(fake.api_base), progress=False)
        calls = fake.completions
        second = run(fake_spec(fake.api_base), progress=False)
        assert fake.completions == calls
    assert second.parent_run_id != first.parent_run_id
    assert [r.model_dump() for r in second.children[0].results] == [
        r.model_dump() for r in first.children[0].results
    ]


def test_lm_cache_serves_a_new_checkpoint_dir_with_same_tokens(home, humaneval_problems):
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        first = run(fake_spec(fake.api_base, limit=2), progress=False)
        calls = fake.completions
        second = run(fake_spec(fake.api_base, limit=2), progress=False, fresh=True)
        assert fake.completions == calls + 1  # only the pre-flight check reached the endpoint
    a, b = first.children[0].results, second.children[0].results
    assert [r.prompt_tokens for r in a] == [r.prompt_tokens for r in b]
    assert all(r.cached_lm_calls == r.lm_calls for r in b)


def _table(home, spec_path):
    client = MlflowClient(tracking_uri(home))
    (child,) = Tracker(home, "test-experiment").runs_tagged({CHILD_TAG: "baseline/seed=0"})
    run_id = child.info.run_id
    frame = pd.read_parquet(client.download_artifacts(run_id, "problems.parquet"))
    return frame[["task_id", "status", "reason", "prompt_tokens", "completion_tokens", "final_code"]]


def test_sigkill_mid_run_then_resume_matches_uninterrupted(tmp_path, humaneval_problems):
    responder = humaneval_responder(humaneval_problems, wrong={"HumanEval/2", "HumanEval/5"})
    with FakeOpenAIServer(responder, delay_s=0.4) as fake:
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=8)))
        env = {**os.environ}

        def cli(home, **kw):
            env["CRITIQUELAB_HOME"] = str(home)
            return subprocess.Popen(
                [sys.executable, "-m", "critiquelab.experiments.cli", "run", str(spec_path), "--no-progress"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw,
            )

        straight = tmp_path / "straight"
        assert cli(straight).wait(timeout=120) == 0

        killed = tmp_path / "killed"
        proc = cli(killed)
        deadline = time.monotonic() + 60
        checkpoint = None
        while time.monotonic() < deadline:
            found = list((killed / "checkpoints").glob("*/*.jsonl")) if killed.exists() else []
            if found and len(found[0].read_text().splitlines()) >= 3:
                checkpoint = found[0]
                break
            time.sleep(0.05)
        assert checkpoint is not None, "the run never checkpointed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        done_before = len(checkpoint.read_text().splitlines())
        assert done_before < 8
        before = fake.completions
        resumed = cli(killed)
        assert resumed.wait(timeout=120) == 0, resumed.stderr.read()
        # Only unfinished problems are redone (+1 pre-flight, +1 for a call cut by the kill).
        assert fake.completions - before <= (8 - done_before) + 2
    lines = [json.loads(line) for line in checkpoint.read_text().splitlines()]
    assert sorted(r["task_id"] for r in lines) == sorted({r["task_id"] for r in lines})
    pd.testing.assert_frame_equal(_table(straight, spec_path), _table(killed, spec_path))


def test_ctrl_c_stops_at_once_and_records_only_finished_problems(home, humaneval_problems):
    """Ctrl-C must not wait for a problem whose model call is still running (a debate problem
    can take minutes); the problem is not recorded, so a resumed run redoes it."""
    answer = humaneval_responder(humaneval_problems)
    stuck_prompt = humaneval_problems[1].prompt.strip()
    entered, release = threading.Event(), threading.Event()

    def respond(messages):
        if any(stuck_prompt in str(m.get("content", "")) for m in messages):
            entered.set()
            release.wait(60)  # the model is "still generating" until the test lets it go
        return answer(messages)

    def interrupt_when_stuck():
        if entered.wait(60):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    # Python leaves SIGINT ignored if it started that way (a background job, as in some CI).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    with FakeOpenAIServer(respond) as fake:
        threading.Thread(target=interrupt_when_stuck, daemon=True).start()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                run(fake_spec(fake.api_base, limit=3, concurrency=1), progress=False)
            stopped_after = time.monotonic() - started
        finally:
            release.set()
            signal.signal(signal.SIGINT, previous)
    assert entered.is_set()
    assert stopped_after < 30, f"the interrupt waited {stopped_after:.0f}s for the problem in flight"
    checkpoint = next((home / "checkpoints").glob("*/*.jsonl"))
    assert [json.loads(line)["task_id"] for line in checkpoint.read_text().splitlines()] == [
        "HumanEval/0"
    ]
    (parent,) = [r for r in Tracker(home, "test-experiment").runs_tagged({}) if PARENT_TAG not in r.data.tags]
    assert parent.info.status == "KILLED"


def _budgeted_run(api_base, limit):
    pipelines = [{"name": "baseline"},
                 {"name": "vote", "params": {"token_budget_from": "baseline", "max_samples": 4}}]
    spec = fake_spec(api_base, pipelines=pipelines, limit=limit, pool={"persist": False})
    return run(spec, progress=False, compare=False)


def test_a_token_budget_measured_on_other_problems_is_not_reused(home, humaneval_problems):
    """token_budget_from resolves to the source's mean on the run's own problems, so a larger run
    (the full set after a `--limit` check) redoes what a smaller run solved under another budget,
    keeps the source's problems, and a repeat of the larger run reuses its own."""
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        small = _budgeted_run(fake.api_base, 1)
        large = _budgeted_run(fake.api_base, 3)
        again = _budgeted_run(fake.api_base, 3)
    small_budget = small.children[0].metrics["tokens_per_problem"]
    large_budget = large.children[0].metrics["tokens_per_problem"]
    assert small_budget != large_budget  # problems of other lengths: another mean

    assert large.children[0].results[0] == small.children[0].results[0]  # no budget: reused
    assert small.children[1].results[0].resolved_params.model_dump() == {"token_budget": small_budget}
    assert [r.resolved_params.model_dump() for r in large.children[1].results] == [
        {"token_budget": large_budget}] * 3
    assert large.children[1].results[0].thread_id != small.children[1].results[0].thread_id
    assert [r.model_dump() for r in again.children[1].results] == [
        r.model_dump() for r in large.children[1].results
    ]


@pytest.mark.parametrize("where", ["critiquelab.experiments.child_steps.make_pipeline",
                                   "critiquelab.experiments.child_steps.results_table"])
def test_an_interrupt_between_a_childs_start_and_its_end_leaves_no_run_running(
    where, home, monkeypatch, humaneval_problems
):
    """Before its problems run (building the pipeline) or after (logging its table): the child run
    already exists, so it and its parent are marked KILLED, not left RUNNING."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(where, interrupted)
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake, pytest.raises(KeyboardInterrupt):
        run(fake_spec(fake.api_base, limit=1, pool={"persist": False}), progress=False)
    runs = Tracker(home, "test-experiment").runs_tagged({})
    assert len(runs) == 2 and {r.info.status for r in runs} == {"KILLED"}
