"""critic_loop and self_refine with a scripted LM (real HTTP + DSPy adapters, fake model)."""

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer, context_overflow
from support.role_responder import review, role_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return a - b"


def _solve(scripts, tmp_path, **params):
    pool = MessagePool()
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=200, num_retries=0)
        pipeline = create_pipeline(params.pop("name", "critic_loop"), **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), fake.requests


def test_approve_first_time(tmp_path):
    prediction, history, _ = _solve(
        {"coder": lambda t: {"code": GOOD}, "critic": lambda t: review("approve")}, tmp_path
    )
    assert prediction.code == GOOD == prediction.outcome.first_code
    assert [m.intent for m in history] == [Intent.TASK_ASSIGNMENT, Intent.OUTPUT_COMPLETE, Intent.CRITIQUE]
    assert prediction.outcome.stop_reason == "approved"
    assert prediction.outcome.fixes == 0


def test_request_changes_then_fix_then_approve(tmp_path):
    def critic(text):
        return review("approve") if "a + b" in text else review("request_changes", "subtracts")

    prediction, history, _ = _solve(
        {"coder": lambda t: {"code": BAD}, "critic": critic, "fixer": lambda t: {"revised_code": GOOD}},
        tmp_path,
    )
    assert [m.intent for m in history] == [
        Intent.TASK_ASSIGNMENT, Intent.OUTPUT_COMPLETE, Intent.CRITIQUE, Intent.FIX, Intent.CRITIQUE,
    ]
    assert (prediction.outcome.first_code, prediction.code) == (BAD, GOOD)
    assert prediction.outcome.reviews == 2 and prediction.outcome.changes_requested
    critique = history[2]
    assert critique.metadata["verdict"] == "request_changes"
    assert critique.metadata["trace"]["role"] == "critic"
    assert critique.metadata["trace"]["inputs"]["code"] == BAD
    assert critique.metadata["trace"]["usage"]["prompt_tokens"] > 0
    assert critique.in_reply_to == history[1].id
    assert "subtracts" in history[3].metadata["trace"]["inputs"]["review"]  # fixer read the review


def test_stops_at_max_iterations(tmp_path):
    prediction, history, _ = _solve(
        {"coder": lambda t: {"code": BAD}, "critic": lambda t: review("reject", "wrong"),
         "fixer": lambda t: {"revised_code": BAD}},
        tmp_path, max_iterations=2,
    )
    assert prediction.outcome.reviews == 2 and prediction.outcome.fixes == 2
    assert prediction.outcome.stop_reason == "max_iterations"
    assert history[-1].intent == Intent.STATUS


def test_unparseable_review_is_never_an_approval(tmp_path):
    prediction, history, _ = _solve(
        {"coder": lambda t: {"code": BAD}, "critic": lambda t: "LGTM!!! ship it",
         "fixer": lambda t: pytest.fail("the fixer must not act on an unparsed review")},
        tmp_path,
    )
    critique = next(m for m in history if m.intent == Intent.CRITIQUE)
    assert critique.metadata["verdict"] == "unparsed"
    assert critique.content == "LGTM!!! ship it"
    assert prediction.outcome.stop_reason == "unparsed_critique"
    assert prediction.outcome.parsed is False


def test_a_fix_that_outgrows_the_context_keeps_the_code_and_does_not_crash(tmp_path):
    def critic(text):
        return review("approve") if "a + b" in text else review("request_changes", "subtracts")

    prediction, history, _ = _solve(
        {"coder": lambda t: {"code": BAD}, "critic": critic, "fixer": lambda t: context_overflow()},
        tmp_path, max_iterations=2,
    )
    assert prediction.code == BAD  # the last code that exists, not an empty revision
    fixes = [m for m in history if m.intent == Intent.FIX]
    assert fixes and all("context window exceeded" in m.metadata["trace"]["error"] for m in fixes)
    assert prediction.outcome.parsed is False


def test_execution_feedback_uses_visible_examples_only(tmp_path):
    seen = []

    def critic(text):
        seen.append(text)
        return review("approve")

    _, history, _ = _solve(
        {"coder": lambda t: {"code": BAD}, "critic": critic}, tmp_path, execution_feedback=True,
    )
    feedback = next(m for m in history if m.intent == Intent.EXECUTION_FEEDBACK)
    assert feedback.content.startswith("FAIL: add(1, 2) returned -1, expected 3")
    assert "FAIL: add(1, 2) returned -1" in seen[0]


def test_meta_critic_drops_wrong_findings(tmp_path):
    prediction, history, _ = _solve(
        {"coder": lambda t: {"code": GOOD},
         "critic": lambda t: review("request_changes", "imaginary bug"),
         "meta_critic": lambda t: {
             "wrong_findings": "[1]", "missing_issues": "[]", "review_is_sound": "False"
         },
         "fixer": lambda t: pytest.fail("no valid finding is left to fix")},
        tmp_path, meta_critic=True,
    )
    meta = next(m for m in history if m.intent == Intent.META_CRITIQUE)
    assert meta.metadata["verdict"] == "approve"
    assert prediction.outcome.stop_reason == "approved"


def test_self_refine(tmp_path):
    def feedback(text):
        correct = "a + b" in text.split("[[ ## code ## ]]")[-1]
        return {"is_correct": str(correct), "feedback": "" if correct else "use +"}

    prediction, history, _ = _solve(
        {"coder": lambda t: {"code": BAD}, "self_feedback": feedback,
         "fixer": lambda t: {"revised_code": GOOD}},
        tmp_path, name="self_refine",
    )
    assert (prediction.outcome.first_code, prediction.code) == (BAD, GOOD)
    assert prediction.outcome.stop_reason == "approved"
    assert {m.sender.split("@")[0] for m in history} >= {"coder", "self_feedback", "self_refiner"}
