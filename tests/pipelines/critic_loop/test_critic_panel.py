"""critic_loop with a panel of critics, against a scripted LM (real HTTP + DSPy adapters): each
critic reviews with its own focus, the reviews reach the fixer as one bundled critique, and the
panel's concurrency changes no request."""

import json

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import review, role_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.critic_loop.panel import bundle_reviews
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter
from critiquelab.signatures.focused_critic import FOCUS_INSTRUCTIONS
from critiquelab.signatures.review import Finding, Review

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return a - b"
PANEL = ["correctness", "edge_cases", "performance"]


def _solve(scripts, **params):
    pool = MessagePool()
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=200, num_retries=0)
        pipeline = create_pipeline("critic_loop", **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
        requests = list(fake.requests)
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), requests


def _panel_critic(text):
    """Correctness objects to the subtraction, edge cases to negatives; performance approves."""
    code = text.rsplit("[[ ## code ## ]]", 1)[-1]
    if "a + b" in code:
        return review("approve")
    if FOCUS_INSTRUCTIONS["correctness"] in text:
        return review("request_changes", "subtracts instead of adding")
    if FOCUS_INSTRUCTIONS["edge_cases"] in text:
        return review("reject", "wrong for negative numbers")
    return review("approve")


SCRIPTS = {"coder": lambda t: {"code": BAD}, "critic": _panel_critic,
           "fixer": lambda t: {"revised_code": GOOD}}


def _finding(text):
    return Finding(severity="major", category="bug", description=text)


def test_bundle_verdict_and_tagged_findings():
    reviews = {
        "correctness": Review(verdict="request_changes", findings=[_finding("off by one")]),
        "performance": Review(verdict="approve"),
        "edge_cases": Review(verdict="reject", findings=[_finding("empty list")]),
    }
    verdict, bundle = bundle_reviews(reviews)
    assert verdict == bundle.verdict == "reject"
    assert [f.description for f in bundle.findings] == ["[correctness] off by one", "[edge_cases] empty list"]
    assert bundle.summary == "correctness: request_changes; performance: approve; edge_cases: reject"
    assert bundle_reviews({"a": Review(verdict="approve"), "b": Review(verdict="approve")})[0] == "approve"
    # An unreadable review is never an approval, and a bundle with nothing readable to act on is none.
    assert bundle_reviews({"a": Review(verdict="approve"), "b": None}) == ("unparsed", None)
    changes = bundle_reviews({"a": Review(verdict="request_changes", findings=[_finding("x")]), "b": None})
    assert changes[0] == "request_changes" and changes[1].findings[0].description == "[a] x"


def test_panel_reviews_are_bundled_into_one_critique_for_the_fixer():
    prediction, history, requests = _solve(SCRIPTS, critics=PANEL)
    assert [m.intent for m in history] == [
        Intent.TASK_ASSIGNMENT, Intent.OUTPUT_COMPLETE, *[Intent.PANEL_REVIEW] * 3, Intent.CRITIQUE,
        Intent.FIX, *[Intent.PANEL_REVIEW] * 3, Intent.CRITIQUE,
    ]
    first_reviews = [m for m in history[2:5]]
    assert [m.metadata["critic"] for m in first_reviews] == PANEL
    assert [m.metadata["trace"]["role"] for m in first_reviews] == [f"critic_{k}" for k in PANEL]
    bundle = history[5]
    assert bundle.metadata["verdict"] == "reject"
    assert bundle.metadata["panel"] == {"correctness": "request_changes", "edge_cases": "reject",
                                        "performance": "approve"}
    fixer_review = history[6].metadata["trace"]["inputs"]["review"]
    assert "[correctness] subtracts instead of adding" in fixer_review
    assert "[edge_cases] wrong for negative numbers" in fixer_review
    assert (prediction.outcome.first_code, prediction.code) == (BAD, GOOD)
    assert prediction.outcome.stop_reason == "approved" and prediction.outcome.reviews == 2
    assert prediction.outcome.changes_requested_by == ["correctness", "edge_cases"]
    critic_requests = [r for r in requests if "`verdict`" in r["messages"][0]["content"]]
    assert len(critic_requests) == 6
    asked = [r["messages"][-1]["content"] for r in critic_requests]
    focuses = [[k for k in PANEL if FOCUS_INSTRUCTIONS[k] in text] for text in asked]
    assert focuses == [[k] for k in PANEL] * 2


@pytest.mark.parametrize("parallel", [2, 3])
def test_concurrent_panel_asks_and_records_the_same(parallel):
    _, sequential, asked = _solve(SCRIPTS, critics=PANEL)
    _, concurrent, asked_concurrently = _solve(SCRIPTS, critics=PANEL, parallel_agents=parallel)

    def contents(history):
        return [(m.intent, m.sender.split("@")[0], m.content, m.metadata.get("critic")) for m in history]

    assert contents(concurrent) == contents(sequential)
    assert sorted(json.dumps(r, sort_keys=True) for r in asked_concurrently) == sorted(
        json.dumps(r, sort_keys=True) for r in asked)


def test_without_a_panel_the_loop_uses_the_single_critic():
    _, history, requests = _solve(SCRIPTS)
    assert Intent.PANEL_REVIEW not in [m.intent for m in history]
    critic_requests = [r for r in requests if "`verdict`" in r["messages"][0]["content"]]
    assert critic_requests and not any("focus" in r["messages"][0]["content"] for r in critic_requests)
