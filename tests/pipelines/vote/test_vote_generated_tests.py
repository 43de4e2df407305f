"""vote with generated tests (CodeT's dual agreement) against a scripted LM over real HTTP; and
vote's default (``tests: visible``) asking and answering exactly what it always did."""

import json

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.agents import sampling_config
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter
from critiquelab.signatures.coder import Coder

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
CONSTANT = "def add(a: int, b: int) -> int:\n    return 3"  # right on the visible example only
TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 0) == 0\nassert add(5, 5) == 10"


def _coder(text, body):  # samples 0, 1, 2 return the constant, samples 3, 4 add
    return {"code": CONSTANT if body["seed"] % 1000 < 3 else GOOD}


SCRIPTS = {"coder": _coder, "test_writer": lambda text, body: {"test_code": TESTS}}


def _lm(api_base):
    return HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=api_base, api_key="x",
                     temperature=0.0, max_tokens=200, num_retries=0, seed=7)


def _run(scripts, **params):
    pool, meter = MessagePool(), UsageMeter()
    with FakeOpenAIServer(role_responder(scripts, with_body=True), pass_body=True) as fake:
        pipeline = create_pipeline("vote", **params)
        with dspy.context(lm=_lm(fake.api_base), adapter=CodeAdapter()), using_pool(pool), metering(meter):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
        requests = list(fake.requests)
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), requests, meter


def test_default_vote_asks_exactly_k_coder_samples_and_answers_as_before():
    prediction, history, requests, _ = _run(SCRIPTS, k=5)
    # The same requests, byte for byte, as k plain coder calls with vote's sampling settings.
    with FakeOpenAIServer(role_responder(SCRIPTS, with_body=True), pass_body=True) as fake:
        coder = dspy.Predict(Coder)
        with dspy.context(lm=_lm(fake.api_base), adapter=CodeAdapter()):
            for index in range(5):
                coder(prompt=PROMPT, config=sampling_config(index, 0.8))
        direct = list(fake.requests)
    # As a multiset: vote draws its samples in parallel by default, so they arrive in any order.
    assert sorted(json.dumps(r, sort_keys=True) for r in requests) == sorted(
        json.dumps(r, sort_keys=True) for r in direct)
    assert [m.intent for m in history] == [Intent.TASK_ASSIGNMENT] + [Intent.PROPOSAL] * 5 + [
        Intent.STATUS, Intent.VERDICT]
    # Behaviour on the visible example: the constant's group is the largest, as vote always chose.
    assert prediction.code == CONSTANT
    assert prediction.outcome.figures() == {"samples": 5, "largest_group": 5, "messages": 8}
    assert prediction.outcome.generated_test_code is None


@pytest.mark.parametrize("tests", ["generated", "both"])
def test_dual_agreement_prefers_fewer_samples_that_pass_more_tests(tests):
    prediction, history, requests, meter = _run(SCRIPTS, k=5, tests=tests, n_tests=4)
    assert prediction.code == GOOD  # 2 samples × 4 tests beat 3 samples × 1 test
    expected_tests = 4  # with both, the written add(1, 2) == 3 is the visible example: one test
    assert prediction.outcome.figures() == {
        "samples": 5, "largest_group": 2, "messages": 9, "tests": expected_tests,
        "consensus_score": 2 * expected_tests, "selection": "dual_agreement",
    }
    written = next(m for m in history if m.intent == Intent.GENERATED_TESTS)
    assert written.content == TESTS and written.metadata["tests"] == 4
    assert prediction.outcome.generated_test_code == TESTS
    verdict = history[-1]
    assert verdict.metadata["matrix"][0] == [1] + [0] * (expected_tests - 1)
    assert verdict.metadata["matrix"][3] == [1] * expected_tests
    # The test writer asks first and sees the prompt and the count, nothing else.
    writer_request = "\n".join(m["content"] for m in requests[0]["messages"])
    assert "`test_code`" in writer_request and PROMPT.strip() in writer_request
    assert "n_tests" in writer_request and "4" in writer_request
    assert meter.by_role["test_writer"].calls == 1 and meter.by_role["coder"].calls == 5


def test_both_counts_the_visible_examples_as_tests():
    others = "\n".join(TESTS.splitlines()[1:])  # the writer leaves out the visible example
    scripts = {**SCRIPTS, "test_writer": lambda text, body: {"test_code": others}}
    generated, _, _, _ = _run(scripts, k=5, tests="generated")
    both, history, _, _ = _run(scripts, k=5, tests="both")
    assert generated.outcome.tests == 3 and both.outcome.tests == 4
    assert generated.outcome.consensus_score == 2 * 3 and both.outcome.consensus_score == 2 * 4
    assert history[-1].metadata["matrix"][0] == [1, 0, 0, 0]  # the constant passes the visible one


def test_no_usable_test_falls_back_to_behaviour_and_says_so():
    scripts = {**SCRIPTS, "test_writer": lambda text, body: {"test_code": "print('no asserts')"}}
    prediction, _, _, _ = _run(scripts, k=5, tests="generated")
    assert prediction.outcome.selection == "behaviour" and prediction.outcome.tests == 0
    assert prediction.code == CONSTANT
    assert prediction.outcome.generated_test_code == ""


def test_the_test_writers_tokens_count_toward_the_budget():
    _, _, _, one = _run(SCRIPTS, k=1)
    per_sample = one.total().prompt_tokens + one.total().completion_tokens
    prediction, _, _, meter = _run(SCRIPTS, tests="generated", token_budget=2.5 * per_sample, max_samples=10)
    writer = meter.by_role["test_writer"].prompt_tokens + meter.by_role["test_writer"].completion_tokens
    assert writer > 0.5 * per_sample  # so the writer's cost leaves room for fewer than 3 samples
    assert prediction.outcome.samples == 2
