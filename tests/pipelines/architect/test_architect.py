"""The architect pipeline with a scripted LM (real HTTP, DSPy adapters, sandbox; fake model):
delegation, dependencies, parallel developers, the review gate, the iteration limit, failures
and timeouts, the session tree."""

import json
import re
import threading
import time

import dspy
import jsonschema
from support.fake_openai import FakeOpenAIServer, chat_reply
from support.role_responder import role_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.architect.session_tree import export_session_tree, session_tree_schema
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = ('def sum_squares(xs: list) -> int:\n    """Sum of the squares.\n    >>> sum_squares([1, 2])\n'
          '    5\n    """\n')
CODE = {
    "square": "def square(x):\n    return x * x",
    "sum_squares": "def sum_squares(xs: list) -> int:\n    return sum(square(x) for x in xs)",
}
WRONG_MAIN = "def sum_squares(xs: list) -> int:\n    return sum(xs)"
PLAN = [{"task_id": "t1", "function_name": "square", "description": "x squared", "priority": "high"},
        {"task_id": "t2", "function_name": "sum_squares", "description": "sum of squares",
         "dependencies": ["t1"]}]


def plan(tasks=PLAN):
    return lambda text: chat_reply(tasks=json.dumps(tasks))


def verdict(kind, *findings):
    items = [{"severity": "major", "category": "bug", "line": 1, "description": f, "suggestion": "fix"}
             for f in findings]
    return lambda text: chat_reply(verdict=kind, findings=json.dumps(items), summary=f"{kind} review")


def function_asked(text):
    return re.search(r"define `(\w+)`", text).group(1)


def developer(text):
    return {"module_code": CODE[function_asked(text)]}


def _solve(scripts, delay_s=0.0, **params):
    pool = MessagePool()
    with FakeOpenAIServer(role_responder(scripts), delay_s=delay_s) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=300, num_retries=0)
        pipeline = create_pipeline("architect", **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool):
            prediction = pipeline(prompt=PROMPT, entry_point="sum_squares", task_id="t/1")
        requests, max_in_flight = list(fake.requests), fake.max_in_flight
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), requests, max_in_flight


def _contracts(history, name):
    return [json.loads(m.content) for m in history if m.metadata.get("contract") == name]


def test_architect_delegates_by_dependency_integrates_and_the_reviewer_approves():
    prediction, history, _, _ = _solve(
        {"architect": plan(), "developer": developer, "team_reviewer": verdict("approved")})
    delegations = _contracts(history, "DeveloperInput")
    assert [d["task"]["task_id"] for d in delegations] == ["t1", "t2"]
    assert "def square(x)" in delegations[1]["context"]  # the dependency's code, done first
    assert delegations[0]["allowed_functions"] == ["square"]
    assert prediction.code.index("def square") < prediction.code.index("def sum_squares")
    assert prediction.outcome.stop_reason == "approved"
    assert (prediction.outcome.tasks_planned, prediction.outcome.waves) == (2, 2)
    (review,) = _contracts(history, "ReviewerOutput")
    assert review["verification"] == {"examples": 1, "passed": 1,
                                      "report": "PASS: sum_squares([1, 2]) returned 5, expected 5"}
    metrics = prediction.outcome.figures()
    assert metrics["agent.developer0.tasks"] == metrics["agent.developer1.tasks"] == 1
    assert metrics["agent.reviewer.verdict.approved"] == 1 and metrics["agent.architect.calls"] == 1
    assert "agent.reviewer.verdict.changes_requested" not in metrics

    # The session tree: one sub-session per delegation, linked to the message that opened it.
    tree = export_session_tree(history)
    jsonschema.validate(tree, session_tree_schema())
    children = tree["root"]["children"]
    assert [(c["session_id"], c["kind"]) for c in children] == [
        ("t1/iteration1/attempt1", "developer"), ("t2/iteration1/attempt1", "developer"),
        ("review/iteration1", "reviewer")]
    by_id = {m["id"]: m for m in tree["root"]["messages"]}
    for child in children:
        trigger = by_id[child["trigger_message_id"]]
        assert trigger["recipient"] == child["agent"]
        assert all(m["in_reply_to"] == trigger["id"] for m in child["messages"])
    assert children[0]["messages"][0]["payload"]["status"] == "completed"


def test_a_wave_of_independent_tasks_runs_in_parallel_with_the_same_result():
    tasks = [{"task_id": "a", "function_name": "square", "description": "x*x"},
             {"task_id": "b", "function_name": "sum_squares", "description": "sum"}]
    scripts = {"architect": plan(tasks), "developer": developer, "team_reviewer": verdict("approved")}
    parallel, _, requests_p, in_flight = _solve(scripts, delay_s=0.2, parallel_agents=2)
    sequential, _, requests_s, in_flight_s = _solve(scripts, delay_s=0.2, parallel_agents=1)
    assert in_flight >= 2 and in_flight_s == 1
    assert parallel.code == sequential.code and parallel.outcome.stop_reason == "approved"
    assert sorted(map(json.dumps, requests_p)) == sorted(map(json.dumps, requests_s))


def test_changes_requested_send_the_tasks_back_with_feedback_until_max_iterations():
    scripts = {"architect": plan(), "developer": developer,
               "team_reviewer": verdict("changes_requested", "needs a docstring")}
    prediction, history, _, _ = _solve(scripts, max_iterations=2)
    assert prediction.outcome.reviews == 2 and prediction.outcome.stop_reason == "max_iterations"
    second = _contracts(history, "DeveloperInput")[2:]
    assert len(second) == 2 and all("needs a docstring" in d["context"] for d in second)
    assert all("The team's current integrated solution" in d["context"] for d in second)


def test_an_approval_of_code_that_fails_the_visible_examples_is_overridden():
    scripts = {"architect": plan([PLAN[1] | {"dependencies": []}]),
               "developer": lambda t: {"module_code": WRONG_MAIN}, "team_reviewer": verdict("approved")}
    prediction, history, _, _ = _solve(scripts, max_iterations=1)
    (review,) = _contracts(history, "ReviewerOutput")
    assert review["verdict"] == "changes_requested" and review["overridden"]
    assert review["findings"][-1]["description"] == "the visible examples fail: 0/1 pass"
    assert prediction.outcome.stop_reason == "max_iterations"


def _flaky_developer(fail_first):
    calls = []

    def respond(text):
        calls.append(function_asked(text))
        if fail_first and calls.count(function_asked(text)) == 1 and function_asked(text) == "square":
            return {"module_code": ""}
        return developer(text)

    return respond


def test_a_failed_developer_is_reported_and_the_task_reassigned():
    scripts = {"architect": plan(), "developer": _flaky_developer(True), "team_reviewer": verdict("approved")}
    prediction, history, _, _ = _solve(scripts)
    (decision,) = _contracts(history, "ArchitectDecision")
    assert decision["action"] == "reassign" and decision["task_id"] == "t1"
    assert decision["failed_developer"].startswith("developer0@")
    assert decision["next_developer"].startswith("developer1@")
    assert decision["reason"] == "no code in the reply"
    statuses = [o["status"] for o in _contracts(history, "DeveloperOutput")]
    assert statuses == ["failed", "completed", "completed"]
    assert prediction.outcome.stop_reason == "approved" and prediction.outcome.reassignments == 1


def test_one_developer_retries_and_a_task_out_of_attempts_aborts_the_run():
    scripts = {"architect": plan(), "developer": _flaky_developer(True), "team_reviewer": verdict("approved")}
    retried, history, _, _ = _solve(scripts, developers=1)
    assert [d["action"] for d in _contracts(history, "ArchitectDecision")] == ["retry"]
    assert retried.outcome.stop_reason == "approved"
    aborted, history, _, _ = _solve(
        {**scripts, "developer": _flaky_developer(True)}, max_task_attempts=1)
    assert [d["action"] for d in _contracts(history, "ArchitectDecision")] == ["abort"]
    assert aborted.outcome.stop_reason == "aborted" and aborted.code == ""
    assert not _contracts(history, "ReviewerOutput")


def test_a_developer_that_times_out_is_reported_and_its_late_answer_dropped():
    slow = threading.Event()

    def respond(text):
        if function_asked(text) == "square" and not slow.is_set():
            slow.set()
            time.sleep(1.5)
        return developer(text)

    scripts = {"architect": plan(), "developer": respond, "team_reviewer": verdict("approved")}
    prediction, history, _, _ = _solve(scripts, developer_timeout_s=0.8, parallel_agents=2)
    (decision,) = _contracts(history, "ArchitectDecision")
    assert decision["action"] == "reassign"
    assert decision["reason"] == "no answer within developer_timeout_s=0.8"
    outputs = [(m.sender.split("@")[0], json.loads(m.content)["status"]) for m in history
               if m.metadata.get("contract") == "DeveloperOutput"]
    assert outputs == [("architect", "failed"), ("developer1", "completed"), ("developer1", "completed")]
    assert prediction.outcome.stop_reason == "approved"


def test_an_unparseable_plan_leaves_the_problem_whole_and_an_unparsed_review_stops():
    scripts = {"architect": lambda t: "no idea", "developer": developer,
               "team_reviewer": lambda t: "looks fine to me"}
    prediction, history, _, _ = _solve(scripts)
    (the_plan,) = _contracts(history, "ArchitectPlan")
    assert [t["function_name"] for t in the_plan["tasks"]] == ["sum_squares"]
    assert the_plan["notes"][0].startswith("the plan was unparseable")
    assert prediction.outcome.stop_reason == "unparsed_review" and prediction.outcome.parsed is False
    assert [m.metadata.get("verdict") for m in history if m.intent == Intent.CRITIQUE] == ["unparsed"]
