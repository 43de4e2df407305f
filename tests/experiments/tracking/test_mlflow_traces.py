"""One MLflow trace per problem of every child run, linked to the run: role calls with their
usage, sandbox runs on the visible examples, every message — and no hidden-test text."""

import json

from support.critic_scripts import HOPELESS, critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.experiments.tracking.traces import MESSAGE_ATTRIBUTE, RESULT_ATTRIBUTE, TASK_TAG, run_traces

PIPELINES = [{"name": "critic_loop", "params": {"execution_feedback": True}}]


def _traces(home, run_id):
    from mlflow.tracing.client import TracingClient

    return run_traces(TracingClient(tracking_uri(home)), run_id)


def test_every_problem_is_one_trace_with_role_call_and_sandbox_spans(home, humaneval_problems):
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=PIPELINES, limit=3), progress=False)
    child = result.children[0]
    traces = _traces(home, child.run_id)
    assert sorted(t.info.tags[TASK_TAG] for t in traces) == [p.task_id for p in humaneval_problems[:3]]
    by_task = {t.info.tags[TASK_TAG]: t for t in traces}
    for problem_result in child.results:
        trace = by_task[problem_result.task_id]
        root = next(s for s in trace.data.spans if s.parent_id is None)
        assert root.get_attribute("status") == problem_result.status.value
        assert root.get_attribute("pipeline") == "critic_loop"
        assert RESULT_ATTRIBUTE in root.attributes and "detail" not in root.get_attribute(RESULT_ATTRIBUTE)
        calls = [s for s in trace.data.spans if s.get_attribute("role")]
        # coder, critic, fixer, critic: the scripted loop makes four role calls
        assert [s.get_attribute("role") for s in calls] == ["coder", "critic", "fixer", "critic"]
        assert sum(s.get_attribute("prompt_tokens") for s in calls) == problem_result.prompt_tokens
        assert all(s.get_attribute("model") == "openai/fake" for s in calls)
        assert all(s.end_time_ns >= s.start_time_ns >= root.start_time_ns for s in trace.data.spans)
        coder = calls[0]
        assert "prompt" in coder.inputs and "first draft" in coder.outputs["code"]
        assert coder.get_attribute("agent").startswith("coder@")
        sandbox = [s for s in trace.data.spans if s.name == "sandbox: visible examples"]
        assert len(sandbox) == 2 and all(s.get_attribute("duration_s") > 0 for s in sandbox)
        # every message is a span, so the viewer can read a run in progress back from them
        messages = [s.get_attribute(MESSAGE_ATTRIBUTE) for s in trace.data.spans if s.parent_id]
        assert len(messages) == child.metrics["messages_per_problem"]
        assert trace.info.state.value == ("OK" if problem_result.passed else "ERROR")
    assert by_task[HOPELESS].info.state.value == "ERROR"

    # Hidden tests never reach a trace.
    text = json.dumps([t.to_dict() for t in traces])
    for problem in humaneval_problems[:3]:
        for line in problem.test.splitlines():
            line = line.strip()
            if len(line) >= 12 and line not in problem.prompt:
                assert json.dumps(line)[1:-1] not in text, (problem.task_id, line)


def test_traces_can_be_switched_off(home, humaneval_problems):
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        spec = fake_spec(fake.api_base, pipelines=PIPELINES, limit=1, tracking={"traces": False})
        result = run(spec, progress=False)
    assert _traces(home, result.children[0].run_id) == []


def test_a_run_that_reuses_checkpoints_traces_those_problems_too(home, humaneval_problems):
    """A larger run after a smaller one solves only the new problem; the checkpointed ones get
    their traces from their pool messages, so every problem of the run has one."""
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        run(fake_spec(fake.api_base, pipelines=PIPELINES, limit=2), progress=False)
        larger = run(fake_spec(fake.api_base, pipelines=PIPELINES, limit=3), progress=False)
    child = larger.children[0]
    traces = {t.info.tags[TASK_TAG]: t for t in _traces(home, child.run_id)}
    assert sorted(traces) == [p.task_id for p in humaneval_problems[:3]]
    reused = traces[humaneval_problems[0].task_id]
    roles = [s.get_attribute("role") for s in reused.data.spans if s.get_attribute("role")]
    assert roles == ["coder", "critic", "fixer", "critic"]
