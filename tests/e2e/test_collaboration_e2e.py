"""scratchpad and architect on the real bundled model, one HumanEval problem each, one review (the
smallest run that exercises every role; on a shared 2-core machine each takes minutes)."""

import json
from pathlib import Path

import jsonschema
import pytest
from mlflow.tracking import MlflowClient

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.pipelines.architect.session_tree import export_session_tree, session_tree_schema
from critiquelab.runtime.pool.messages import Message
from critiquelab.runtime.scratchpad.events import ScratchpadIntent
from critiquelab.runtime.scratchpad.replay import replay

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]


def _messages(home, run_id):
    log = MlflowClient(tracking_uri(home)).download_artifacts(run_id, "messages.jsonl")
    return [Message.model_validate_json(line) for line in Path(log).read_text().splitlines()]


def _no_hidden_test_in_inputs(problem, thread):
    hidden = [line.strip() for line in problem.test.splitlines()
              if len(line.strip()) >= 12 and line.strip() not in problem.prompt]
    inputs = json.dumps([m.metadata.get("trace", {}).get("inputs") for m in thread])
    assert not [line for line in hidden if json.dumps(line)[1:-1] in inputs]


def test_scratchpad_team_on_bundled_model(home, humaneval_problems):
    spec = {
        "name": "e2e-scratchpad",
        "dataset": {"source": "humaneval", "limit": 1},
        "model": {"id": "local", "max_tokens": 384},
        "pipelines": [{"name": "scratchpad", "params": {"max_iterations": 1, "mode": "parallel"}}],
    }
    child = run(spec, progress=False).children[0]
    assert len(child.results) == 1 and "first_pass_at_1" in child.metrics
    messages = _messages(home, child.run_id)
    for problem, result in zip(humaneval_problems[:1], child.results, strict=True):
        thread = [m for m in messages if m.thread_id == result.thread_id]
        assert thread[0].intent == ScratchpadIntent.INIT  # created before the task is assigned
        assert result.extra["agent.coder.calls"] >= 1 and result.extra["reviews"] >= 1
        state = replay(thread, "scratchpad")  # the logged events rebuild what the team ended with
        assert state.values["code"] is not None and state.values["test_results"]
        _no_hidden_test_in_inputs(problem, thread)


def test_architect_team_on_bundled_model(home, humaneval_problems):
    spec = {
        "name": "e2e-architect",
        "dataset": {"source": "humaneval", "limit": 1},
        "model": {"id": "local", "max_tokens": 384},
        "pipelines": [{"name": "architect", "params": {"max_iterations": 1, "developers": 2}}],
    }
    child = run(spec, progress=False).children[0]
    assert len(child.results) == 1
    messages = _messages(home, child.run_id)
    for problem, result in zip(humaneval_problems[:1], child.results, strict=True):
        thread = [m for m in messages if m.thread_id == result.thread_id]
        assert result.extra["tasks_planned"] >= 1 and result.extra["agent.architect.calls"] == 1
        assert result.extra["stop_reason"] in ("approved", "max_iterations", "aborted", "unparsed_review")
        tree = export_session_tree(thread)
        jsonschema.validate(tree, session_tree_schema())
        assert {c["kind"] for c in tree["root"]["children"]} >= {"developer"}
        _no_hidden_test_in_inputs(problem, thread)
