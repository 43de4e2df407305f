"""scratchpad and architect through the runner: scored, messages persisted and logged, per-agent
figures in the per-problem table, and no hidden test in any LM request of any of their roles."""

import json
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer, chat_reply
from support.role_responder import ScriptedProblems, review, role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.pipelines.architect.session_tree import export_session_tree
from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Message

LIMIT = 4


def _scripts(problems):
    scripted = ScriptedProblems(problems)

    def first_then_fixed(text):  # the first draft is wrong; a revision (after a review) is right
        return {"code": scripted.solution(text) if "## reviews" in text else scripted.wrong(text)}

    def architect(text):
        entry = re.search(r"\[\[ ## entry_point ## \]\]\n(\w+)", text).group(1)
        task = {"task_id": "main", "function_name": entry, "description": "all"}
        return chat_reply(tasks=json.dumps([task]))

    def team_reviewer(text):
        return chat_reply(verdict="approved", findings="[]", summary="fine")

    return {
        "analyst": lambda t: {"approach": "follow the docstring", "edge_cases": '["empty input"]'},
        "coder": first_then_fixed,
        "critic": lambda t: review("approve") if "return None" not in t.rsplit("## code", 1)[-1]
        else review("request_changes", "returns None"),
        "architect": architect, "developer": lambda t: {"module_code": scripted.solution(t)},
        "team_reviewer": team_reviewer,
    }


@pytest.mark.parametrize("pipeline", [
    {"name": "scratchpad", "params": {"mode": "parallel"}},
    {"name": "architect", "params": {"developers": 2}},
])
def test_team_pipeline_runs_logs_and_never_shows_a_hidden_test(home, humaneval_problems, pipeline):
    with FakeOpenAIServer(role_responder(_scripts(humaneval_problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=[pipeline], limit=LIMIT), progress=False)
        requests = list(fake.requests)
    child = result.children[0]
    assert child.metrics["pass_at_1"] == 1.0
    roles = {"scratchpad": ["analyst", "coder", "reviewer"],
             "architect": ["architect", "developer0", "reviewer"]}[pipeline["name"]]
    for r in child.results:
        assert r.extra["stop_reason"] == "approved"
        for role in roles:  # per-agent figures reach the per-problem table
            assert r.extra[f"agent.{role}.calls"] >= 1 and r.extra[f"agent.{role}.prompt_tokens"] > 0

    # Every message is logged with the run and persisted in Chroma.
    client = MlflowClient(tracking_uri(home))
    log = client.download_artifacts(child.run_id, "messages.jsonl")
    messages = [json.loads(line) for line in Path(log).read_text().splitlines()]
    with MessagePool(ChromaPoolStore(home / "chroma")) as reopened:
        assert len(reopened.history(run_id=child.run_id)) == len(messages)
    if pipeline["name"] == "architect":
        thread = [Message.model_validate(m) for m in messages if m["thread_id"] == child.results[0].thread_id]
        assert export_session_tree(thread)["root"]["children"]

    # Hidden tests never reach a prompt, whichever role sent the request.
    sent = "\n".join(json.dumps(r) for r in requests)
    sent_raw = "\n".join(str(m.get("content", "")) for r in requests for m in r.get("messages", []))
    checked = 0
    for problem in humaneval_problems[:LIMIT]:
        for line in problem.test.splitlines():
            line = line.strip()
            if len(line) >= 12 and line not in problem.prompt:
                checked += 1
                assert line not in sent_raw and json.dumps(line)[1:-1] not in sent, (problem.task_id, line)
    assert checked >= LIMIT


def test_collaboration_patterns_spec_runs_all_four_and_compares(home, humaneval_problems):
    """experiments/collaboration_patterns.yaml against a scripted endpoint: every pipeline runs
    and the run ends with the comparison."""
    import yaml

    scripts = _scripts(humaneval_problems)
    scripts["fixer"] = lambda t: {"revised_code": scripts["developer"](t)["module_code"]}
    data = yaml.safe_load(Path("experiments/collaboration_patterns.yaml").read_text())
    data["model"] = {"id": "openai/fake", "num_retries": 0}
    data["dataset"]["limit"] = 2
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        data["model"]["api_base"] = fake.api_base
        result = run(data, progress=False)
    assert [c.pipeline for c in result.children] == ["baseline", "critic_loop", "scratchpad", "architect"]
    assert result.children[0].metrics["pass_at_1"] == 0.0  # the scripted first draft is wrong
    assert all(c.metrics["pass_at_1"] == 1.0 for c in result.children[1:])  # ... and gets fixed
    compared = sorted(result.comparison.table["pipeline"])
    assert compared == ["architect", "baseline", "critic_loop", "scratchpad"]
