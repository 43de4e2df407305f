"""critic_loop with execution feedback on the real bundled model, 3 HumanEval problems."""

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.pool.messages import Intent

pytestmark = pytest.mark.e2e


def test_critic_loop_with_execution_feedback(home, humaneval_problems):
    spec = {
        "name": "e2e-critic-loop",
        "dataset": {"source": "humaneval", "limit": 3},
        "model": {"id": "local"},
        "pipelines": [{"name": "critic_loop", "params": {"execution_feedback": True, "max_iterations": 2}}],
    }
    result = run(spec, progress=False)
    child = result.children[0]
    assert len(child.results) == 3
    for key in ("pass_at_1", "first_pass_at_1", "messages_per_problem", "role.coder.tokens",
                "role.critic.tokens"):
        assert key in child.metrics, key
    # Rates over no qualifying problem are absent, never 0 (critiquelab.eval.summary).
    assert ("harmful_revision_rate" in child.metrics) == (child.metrics["first_pass_at_1"] > 0)
    challenged = [r for r in child.results
                  if not r.extra["first_passed"] and r.extra.get("changes_requested")]
    assert ("critique_success_rate" in child.metrics) == bool(challenged)

    log = MlflowClient(tracking_uri(home)).download_artifacts(child.run_id, "messages.jsonl")
    messages = [json.loads(line) for line in Path(log).read_text().splitlines()]
    for problem in humaneval_problems[:3]:
        thread = [m for m in messages if m["task_id"] == problem.task_id]
        intents = [m["intent"] for m in thread]
        assert intents[:2] == [Intent.TASK_ASSIGNMENT, Intent.OUTPUT_COMPLETE]
        assert Intent.EXECUTION_FEEDBACK in intents and Intent.CRITIQUE in intents
        critiques = [m for m in thread if m["intent"] == Intent.CRITIQUE]
        assert all(m["metadata"]["verdict"] in ("approve", "request_changes", "reject", "unparsed")
                   for m in critiques)
        # Every role call left its trace: inputs, outputs, usage.
        for m in thread:
            if "trace" in m["metadata"]:
                assert m["metadata"]["trace"]["usage"]["calls"] >= 1
        # Hidden tests never reach a prompt: no role input contains a hidden-test line.
        hidden = [line.strip() for line in problem.test.splitlines()
                  if len(line.strip()) >= 12 and line.strip() not in problem.prompt]
        inputs = json.dumps([m["metadata"].get("trace", {}).get("inputs") for m in thread])
        assert not [line for line in hidden if json.dumps(line)[1:-1] in inputs]
