"""sop and role_play on the real bundled model, one HumanEval problem each, small limits."""

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.pool.messages import Intent

pytestmark = pytest.mark.e2e


def _messages(home, run_id):
    log = MlflowClient(tracking_uri(home)).download_artifacts(run_id, "messages.jsonl")
    return [json.loads(line) for line in Path(log).read_text().splitlines()]


def _no_hidden_test_in_role_inputs(messages, problem):
    """No hidden-test line the prompt does not show is in any role's recorded inputs."""
    traced = [m["metadata"]["trace"]["inputs"] for m in messages if "trace" in m["metadata"]]
    inputs = "\n".join(json.dumps(i) for i in traced)
    for line in (line.strip() for line in problem.test.splitlines()):
        if len(line) >= 12 and line not in problem.prompt:
            assert json.dumps(line)[1:-1] not in inputs, line


def test_sop_on_bundled_model(home, humaneval_problems):
    spec = {
        "name": "e2e-sop",
        "dataset": {"source": "humaneval", "limit": 1},
        "model": {"id": "local", "max_tokens": 384, "n_ctx": 8192},
        "pipelines": [{"name": "sop", "params": {"max_iterations": 1, "n_tests": 3}}],
    }
    child = run(spec, progress=False).children[0]
    (result,) = child.results
    assert result.extra["stop_reason"] in ("qa_passed", "max_iterations")
    assert result.extra["versions"] == 1 and result.extra["qa_runs"] >= 1
    assert "handoff_rejections" in child.metrics and "unvalidated_handoffs" in child.metrics
    if result.extra["generated_tests"]:  # HumanEval has reference solutions: the accuracy is scored
        assert 0 <= child.metrics["generated_test_accuracy"] <= 1
    messages = _messages(home, child.run_id)
    stages = [m["metadata"]["stage"] for m in messages if m["intent"] == Intent.HANDOFF]
    # The line hands over in order; a rejected artifact is handed over again before the next stage.
    order = ["spec", "design", "code"]
    assert list(dict.fromkeys(stages))[:3] == order
    ranks = [order.index(stage) for stage in stages if stage in order]
    assert ranks == sorted(ranks)
    answered = sum(m["intent"] in (Intent.HANDOFF_ACCEPTED, Intent.HANDOFF_REJECTED) for m in messages)
    assert answered == len(stages)  # every handoff acknowledged or returned
    _no_hidden_test_in_role_inputs(messages, humaneval_problems[0])


def test_role_play_on_bundled_model(home, humaneval_problems):
    spec = {
        "name": "e2e-role-play",
        "dataset": {"source": "humaneval", "limit": 1},
        "model": {"id": "local", "max_tokens": 512},
        "pipelines": [{"name": "role_play", "params": {"max_turns": 2}}],
    }
    child = run(spec, progress=False).children[0]
    (result,) = child.results
    reasons = ("done", "max_turns", "role_flip", "repeated_instruction", "no_progress")
    assert result.extra["stop_reason"] in reasons
    assert result.extra["turns"] <= 2
    for key in ("role_flips", "repeated_instructions", "no_progress_turns"):
        assert key in child.metrics, key
    messages = _messages(home, child.run_id)
    intents = [m["intent"] for m in messages]
    assert intents[:2] == [Intent.TASK_ASSIGNMENT, Intent.TASK_SPECIFIED] and intents[-1] == Intent.STATUS
    _no_hidden_test_in_role_inputs(messages, humaneval_problems[0])
