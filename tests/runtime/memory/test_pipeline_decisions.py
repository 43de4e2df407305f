"""The decisions the architect team and the SOP line really publish (scripted LM, real HTTP and
DSPy adapters, sandbox) are recognised: the messages' shapes and the recognisers agree."""

import json

import dspy
from support.fake_openai import FakeOpenAIServer
from support.role_responder import review, role_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.memory.decisions import decision_outcomes, decisions_in
from critiquelab.runtime.memory.reflection import visible_outcome
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return a - b"  # fails the visible example


def _thread(name, scripts, **params):
    pool = MessagePool()
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=300, num_retries=0)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool):
            prediction = create_pipeline(name, **params)(prompt=PROMPT, entry_point="add", task_id="t/1")
    history = pool.history(thread_id=prediction.outcome.thread_id)
    outcomes = decision_outcomes(history, task_id="t/1", run_id="r", prompt=PROMPT,
                                 check=lambda code: visible_outcome(PROMPT, "add", code))
    return decisions_in(history), outcomes


def test_architect_run_reassign_override_and_approval_are_recognised():
    answers = iter(["", BAD, GOOD])  # developer0 fails, developer1 writes BAD, then GOOD on review
    scripts = {
        "architect": lambda t: {"tasks": json.dumps([{"task_id": "t1", "function_name": "add",
                                                       "description": "add them"}])},
        "developer": lambda t: {"module_code": next(answers)},
        # The model always approves; the failing visible example overrides the first approval.
        "team_reviewer": lambda t: {"verdict": "approved", "findings": "[]", "summary": "fine"},
    }
    decisions, outcomes = _thread("architect", scripts, developers=2, max_iterations=2)
    assert [(d.role, d.kind) for d in decisions] == [
        ("architect", "reassign"), ("team_reviewer", "request_changes"), ("team_reviewer", "approve")]
    assert "return a - b" in decisions[0].code and "return a + b" in decisions[1].code
    assert "the visible examples fail: 0/1 pass" in decisions[1].reason
    assert [e.context["visible_passed"] for e in outcomes] == [False, True, True]


def test_sop_run_qa_verdicts_and_gate_approval_are_recognised():
    versions = iter([BAD, GOOD])
    scripts = {
        "product_manager": lambda t: {"spec": json.dumps({"function": "add", "inputs": ["a", "b"],
                                                          "output": "a + b", "edge_cases": [],
                                                          "examples": ["add(1, 2) == 3"]})},
        "architect": lambda t: {"design": json.dumps({"signature": "def add(a: int, b: int) -> int:",
                                                      "helpers": [], "approach": "a + b"})},
        "engineer": lambda t: {"implementation_code": next(versions)},
        "qa_engineer": lambda t: {"acceptance_test_code": "assert add(2, 2) == 4"},
        "critic": lambda t: review("approve"),
    }
    decisions, outcomes = _thread("sop", scripts, reviewer=True)
    assert [(d.role, d.kind, d.reason, d.code) for d in decisions] == [
        ("qa_engineer", "qa_fail", "2 failing of 2 tests run", GOOD),
        ("qa_engineer", "qa_pass", "2 tests run, none failing", GOOD),
        ("reviewer", "approve", "approve review", GOOD),
    ]
    assert [e.context["visible_passed"] for e in outcomes] == [True, True, True]
