"""tree_search on the real bundled model: two HumanEval problems, a small search."""

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.pool.messages import Intent

# Five model calls per problem (two drafts, a reflection, two repairs); a loaded 2-core machine
# answers slowly, hence a longer limit than the suite's 900 s.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

TASKS = ["HumanEval/1", "HumanEval/10"]  # problems the 0.5B model often gets wrong


def test_tree_search_on_bundled_model(home, humaneval_problems):
    spec = {
        "name": "e2e-tree-search",
        "dataset": {"source": "humaneval", "task_ids": TASKS},
        "model": {"id": "local", "max_tokens": 384},
        "pipelines": [{"name": "tree_search", "params": {
            "n": 2, "max_expansions": 2, "stop": "exhaust", "greedy_first": False, "parallel_agents": 2,
        }}],
    }
    child = run(spec, progress=False).children[0]
    assert sorted(r.task_id for r in child.results) == TASKS
    for key in ("pass_at_1", "role.coder.calls", "tree_has_passing_node_rate", "passing_node_not_chosen"):
        assert key in child.metrics, key
    for result in child.results:
        assert len(result.extra["nodes_passed"]) == result.extra["nodes"] >= 2
        assert result.extra["stop_reason"] in ("max_expansions", "exhausted")

    log = MlflowClient(tracking_uri(home)).download_artifacts(child.run_id, "messages.jsonl")
    messages = [json.loads(line) for line in Path(log).read_text().splitlines()]
    for problem in (p for p in humaneval_problems if p.task_id in TASKS):
        thread = [m for m in messages if m["task_id"] == problem.task_id]
        assignment = next(m for m in thread if m["intent"] == Intent.TASK_ASSIGNMENT)
        nodes = {m["metadata"]["node"]: m for m in thread if m["intent"] == Intent.PROPOSAL}
        feedback = {m["metadata"]["node"]: m for m in thread if m["intent"] == Intent.EXECUTION_FEEDBACK}
        # The tree is in the pool: every node names its parent's message.
        for node in nodes.values():
            parent = node["metadata"]["parent_node"]
            parent_id = assignment["id"] if parent == 0 else nodes[parent]["id"]
            assert node["metadata"]["parent_id"] == parent_id == node["in_reply_to"]
        # A repair reads its parent's real execution feedback on the visible examples.
        repairs = [n for n in nodes.values() if n["metadata"]["parent_node"] != 0]
        unsolved_roots = [i for i, f in feedback.items()
                          if nodes[i]["metadata"]["parent_node"] == 0 and not f["metadata"]["solved"]]
        assert bool(repairs) == bool(unsolved_roots)
        for repair in repairs:
            inputs = repair["metadata"]["trace"]["inputs"]
            assert inputs["execution_feedback"] == feedback[repair["metadata"]["parent_node"]]["content"]
            assert "expected:" in inputs["execution_feedback"]
        verdict = next(m for m in thread if m["intent"] == Intent.VERDICT)
        assert verdict["metadata"]["tree"][0]["visits"] == len(nodes)
        # Hidden tests never reach a prompt: no role input contains a hidden-test line.
        hidden = [line.strip() for line in problem.test.splitlines()
                  if len(line.strip()) >= 12 and line.strip() not in problem.prompt]
        inputs = json.dumps([m["metadata"].get("trace", {}).get("inputs") for m in thread])
        assert not [line for line in hidden if json.dumps(line)[1:-1] in inputs]
