"""The SOP line with a scripted LM (real HTTP + DSPy adapters): typed handoffs validated by the
receiver and returned to the sender, the QA loop and its end, and the reviewer gate."""

import json

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import review, role_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return 3"  # passes the visible example only
SPEC = json.dumps({"function": "add", "inputs": ["a: int", "b: int"], "output": "a + b",
                   "edge_cases": ["negative numbers"], "examples": ["add(1, 2) == 3"]})
DESIGN = json.dumps({"signature": "def add(a: int, b: int) -> int:", "helpers": [],
                     "approach": "return a + b"})
TESTS = "assert add(2, 2) == 4\nassert add(-1, 1) == 0"


def _engineer(text):
    return {"implementation_code": GOOD if "expected 4" in text else BAD}


SCRIPTS = {
    "product_manager": lambda t: {"spec": SPEC},
    "architect": lambda t: {"design": DESIGN},
    "engineer": _engineer,
    "qa_engineer": lambda t: {"acceptance_test_code": TESTS},
}


def _solve(scripts, prompt=PROMPT, **params):
    pool = MessagePool()
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=200, num_retries=0)
        pipeline = create_pipeline("sop", **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool):
            prediction = pipeline(prompt=prompt, entry_point="add", task_id="t/1")
        requests = list(fake.requests)
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), requests


def _stages(history, intent):
    return [m.metadata["stage"] for m in history if m.intent == intent]


def test_the_line_hands_over_validated_artifacts_and_revises_until_qa_passes():
    prediction, history, requests = _solve(SCRIPTS)
    assert _stages(history, Intent.HANDOFF) == ["spec", "design", "code", "qa_report", "code"]
    assert _stages(history, Intent.HANDOFF_ACCEPTED) == ["spec", "design", "code", "qa_report", "code"]
    handoff = json.loads(next(m for m in history if m.intent == Intent.HANDOFF).content)
    assert set(handoff) == {"summary", "artifact", "blockers", "next_action"}
    assert json.loads(handoff["artifact"])["function"] == "add" and handoff["blockers"] == []
    first_report = json.loads(next(m for m in history if m.intent == Intent.QA_REPORT).content)
    assert first_report["passed"] is False and first_report["tests_run"] == 3  # 2 written + 1 visible
    assert first_report["failures"] == ["FAIL: add(2, 2) returned 3, expected 4",
                                        "FAIL: add(-1, 1) returned 3, expected 0"]
    revise = [r for r in requests if "`implementation_code`" in r["messages"][0]["content"]][-1]
    assert "add(2, 2) returned 3, expected 4" in revise["messages"][-1]["content"]
    assert (prediction.outcome.first_code, prediction.code) == (BAD, GOOD)
    assert prediction.outcome.generated_test_code == TESTS
    metrics = prediction.outcome.figures()
    assert (metrics["stop_reason"], metrics["versions"], metrics["qa_runs"]) == ("qa_passed", 2, 2)
    assert metrics["qa_passed"] and metrics["changes_requested"]
    assert (metrics["handoff_rejections"], metrics["unvalidated_handoffs"]) == (0, 0)
    # The QA engineer writes its tests from the spec and the prompt, before and without any code.
    qa_request = next(r for r in requests if "`acceptance_test_code`" in r["messages"][0]["content"])
    asked = qa_request["messages"][-1]["content"]
    assert '"function":"add"' in asked.replace(" ", "") and "return 3" not in asked


def test_an_invalid_artifact_goes_back_to_its_sender_with_the_error():
    calls = []

    def product_manager(text):  # (DSPy asks twice per call: ChatAdapter, then its JSON fallback)
        calls.append(text)
        return {"spec": SPEC} if "Field required" in text else {"spec": json.dumps({"function": "add"})}

    prediction, history, _ = _solve({**SCRIPTS, "product_manager": product_manager})
    rejected = [m for m in history if m.intent == Intent.HANDOFF_REJECTED]
    assert [m.metadata["stage"] for m in rejected] == ["spec"]
    assert "inputs: Field required" in rejected[0].content and "output: Field required" in rejected[0].content
    assert rejected[0].recipient.startswith("product_manager@")
    first = json.loads(next(m for m in history if m.intent == Intent.HANDOFF).content)
    assert first["blockers"] == ["the reply could not be parsed into the stage's schema"]
    assert "inputs: Field required" in calls[-1]  # the retry was asked with the rejection
    assert prediction.outcome.handoff_rejections == 1 and prediction.outcome.unvalidated_handoffs == 0
    assert prediction.outcome.stop_reason == "qa_passed"


def test_when_retries_are_used_up_the_line_goes_on_unvalidated():
    scripts = {**SCRIPTS, "architect": lambda t: {"design": json.dumps({"signature": ""})}}
    prediction, history, _ = _solve(scripts, max_handoff_retries=2)
    assert _stages(history, Intent.HANDOFF_REJECTED) == ["design", "design"]
    accepted = [m for m in history if m.intent == Intent.HANDOFF_ACCEPTED and m.metadata["stage"] == "design"]
    assert [m.metadata["validated"] for m in accepted] == [False]
    assert prediction.outcome.handoff_rejections == 2 and prediction.outcome.unvalidated_handoffs == 1
    assert prediction.code == GOOD


def test_the_qa_loop_stops_after_max_iterations_versions():
    scripts = {**SCRIPTS, "engineer": lambda t: {"implementation_code": BAD}}
    prediction, history, _ = _solve(scripts, max_iterations=2)
    metrics = prediction.outcome.figures()
    assert (metrics["stop_reason"], metrics["versions"], metrics["qa_runs"]) == ("max_iterations", 2, 2)
    assert not metrics["qa_passed"]
    assert sum(m.intent == Intent.GENERATED_TESTS for m in history) == 1  # tests are written once


def test_code_that_does_not_compile_is_returned_unrun_and_rewritten():
    versions = []

    def engineer(text):
        versions.append(text)
        return {"implementation_code": "def add(a, b) return" if len(versions) == 1 else GOOD}

    prediction, history, _ = _solve({**SCRIPTS, "engineer": engineer}, max_iterations=1)
    rejected = [m for m in history if m.intent == Intent.HANDOFF_REJECTED]
    assert [m.metadata["stage"] for m in rejected] == ["code"] and "does not compile" in rejected[0].content
    assert "QA could not run your code" in versions[-1]
    assert prediction.outcome.stop_reason == "qa_passed" and prediction.outcome.versions == 1
    assert prediction.code == GOOD


def test_reviewer_gate_sends_a_passing_version_back_until_approved():
    reviews = []

    def critic(text):
        reviews.append(text)
        return review("request_changes", "rename the parameters") if len(reviews) == 1 else review("approve")

    scripts = {**SCRIPTS, "engineer": lambda t: {"implementation_code": GOOD}, "critic": critic}
    prediction, history, _ = _solve(scripts, reviewer=True)
    assert _stages(history, Intent.HANDOFF) == [
        "spec", "design", "code", "release", "review", "code", "release"]
    assert prediction.outcome.stop_reason == "approved" and prediction.outcome.versions == 2
    assert len(reviews) == 2


NO_EXAMPLES = 'def add(a: int, b: int) -> int:\n    """Add two numbers."""\n'


@pytest.mark.parametrize("stub", [
    "def add(a: int, b: int) -> int:\n    \"\"\"Add two numbers.\"\"\"",
    "def add(a: int, b: int) -> int:\n    pass",
    "def add(a: int, b: int) -> int:\n    ...",
    "def add(a: int, b: int) -> int:\n    raise NotImplementedError('later')",
    "def helper() -> int:\n    return 1",  # the entry point's def is missing
])
def test_qa_sends_back_a_version_that_does_not_implement_the_function(stub):
    # No visible example and no usable generated test: nothing would ever call the stub.
    scripts = {
        **SCRIPTS,
        "qa_engineer": lambda t: {"acceptance_test_code": "assert True"},
        "engineer": lambda t: {"implementation_code": GOOD if "is not implemented" in t else stub},
    }
    prediction, history, _ = _solve(scripts, prompt=NO_EXAMPLES)
    reports = [json.loads(m.content) for m in history if m.intent == Intent.QA_REPORT]
    assert [r["passed"] for r in reports] == [False, True]
    assert reports[0]["failures"][0].startswith("FAIL: add is not implemented")
    assert _stages(history, Intent.HANDOFF) == ["spec", "design", "code", "qa_report", "code"]
    assert (prediction.outcome.first_code, prediction.code) == (stub, GOOD)
    assert prediction.outcome.stop_reason == "qa_passed" and prediction.outcome.changes_requested
