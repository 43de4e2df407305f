"""debate and vote with a scripted LM that reads each request's seed (real HTTP + adapters)."""

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.core.errors import UserError
from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.debate.agents import neighbours
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return a - b"


def _run(name, scripts, **params):
    pool = MessagePool()
    meter = UsageMeter()
    with FakeOpenAIServer(role_responder(scripts, with_body=True), pass_body=True) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=200, num_retries=0, seed=7)
        pipeline = create_pipeline(name, **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool), metering(meter):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), fake.requests, meter


def test_topologies():
    assert neighbours(0, 3, "full") == [1, 2]
    assert neighbours(0, 5, "ring") == [1, 4]
    assert neighbours(0, 4, "star") == [1, 2, 3] and neighbours(2, 4, "star") == [0]
    with pytest.raises(ValueError):
        neighbours(0, 3, "mesh")


def _debate_scripts(judge_choice="2", merged_code=""):
    def coder(text, body):  # debater index = seed % 100 (sampling_config: base * 1000 + index)
        return {"code": BAD if body["seed"] % 100 == 0 else GOOD}

    return {
        "coder": coder,
        "debater": lambda text, body: {"argument": "addition, not subtraction", "revised_code": GOOD},
        "judge": lambda text, body: {
            "choice": judge_choice, "rationale": "it adds", "merged_code": merged_code,
        },
    }


def test_debate_messages_consensus_and_scored_codes():
    prediction, history, requests, _ = _run("debate", _debate_scripts(), debaters=3, rounds=1)
    intents = [m.intent for m in history]
    assert intents.count(Intent.PROPOSAL) == 3 and intents.count(Intent.ARGUMENT) == 3
    assert intents[0] == Intent.TASK_ASSIGNMENT and intents[-1] == Intent.VERDICT
    assert prediction.code == GOOD
    assert prediction.outcome.agreement == [pytest.approx(2 / 3), 1.0]
    assert prediction.outcome.consensus and prediction.outcome.final_in_majority
    assert prediction.outcome.codes_to_score["debaters_first_passed"] == [BAD, GOOD, GOOD]
    assert prediction.outcome.codes_to_score["debaters_final_passed"] == [GOOD, GOOD, GOOD]
    seeds = sorted(r["seed"] for r in requests if "seed" in r)
    assert len(set(seeds[:3])) == 3  # independent initial samples


def test_ring_debater_reads_only_its_neighbours():
    _, history, _, _ = _run("debate", _debate_scripts(), debaters=4, rounds=1, topology="ring")
    first = next(m for m in history if m.intent == Intent.ARGUMENT and m.metadata["debater"] == 0)
    others = first.metadata["trace"]["inputs"]["others"]
    assert "Debater 2 says" in others and "Debater 4 says" in others
    assert "Debater 3 says" not in others


def test_unusable_judge_verdict_is_recorded_as_fallback():
    prediction, history, _, _ = _run("debate", _debate_scripts(judge_choice="9"), debaters=2, rounds=0)
    verdict = history[-1]
    assert verdict.metadata["decision"] == "fallback"
    assert prediction.outcome.judge_decision == "fallback"


MERGED = "def add(a: int, b: int) -> int:\n    return b + a"


@pytest.mark.parametrize(("merged_code", "decision", "code"), [
    (PROMPT, "chosen", GOOD),  # the prompt's stub copied back: no merge, the choice stands
    ("def add(a: int, b: int) -> int:\n    pass", "chosen", GOOD),
    ("[3]", "chosen", GOOD),  # an example output in the code field
    (MERGED, "merged", MERGED),
])
def test_judge_merge_counts_only_if_it_implements_the_function(merged_code, decision, code):
    prediction, history, _, _ = _run(
        "debate", _debate_scripts(judge_choice="2", merged_code=merged_code), debaters=2, rounds=0
    )
    assert history[-1].metadata["decision"] == decision
    assert prediction.code.strip() == code


def test_vote_picks_the_largest_behaviour_group():
    def coder(text, body):
        return {"code": BAD if body["seed"] % 1000 in (0, 3) else GOOD}

    prediction, history, _, _ = _run("vote", {"coder": coder}, k=5)
    assert prediction.code == GOOD
    assert prediction.outcome.figures() == {"samples": 5, "largest_group": 3, "messages": len(history)}
    assert prediction.outcome.codes_to_score["samples_passed"] == [BAD, GOOD, GOOD, BAD, GOOD]


def test_vote_token_budget_stops_sampling():
    _, _, _, unbounded = _run("vote", {"coder": lambda t, b: {"code": GOOD}}, k=1)
    per_sample = unbounded.total().prompt_tokens + unbounded.total().completion_tokens
    prediction, _, _, meter = _run("vote", {"coder": lambda t, b: {"code": GOOD}},
                                   token_budget=2.5 * per_sample, max_samples=10)
    assert prediction.outcome.samples == 3
    assert meter.total().calls == 3


def _mostly_wrong(text, body):
    """Samples 1 and 4 pass the prompt's example; the other three agree on a wrong answer."""
    return {"code": GOOD if body["seed"] % 1000 in (1, 4) else BAD}


def test_vote_visible_filter_prefers_samples_returning_the_visible_examples_values():
    agreed, _, _, _ = _run("vote", {"coder": _mostly_wrong}, k=5)
    filtered, _, _, _ = _run("vote", {"coder": _mostly_wrong}, k=5, select="visible_filter")
    assert agreed.code == BAD and agreed.outcome.largest_group == 3
    assert filtered.code == GOOD
    assert (filtered.outcome.largest_group, filtered.outcome.visible_passing_samples) == (2, 2)
    nobody = lambda t, b: {"code": BAD if b["seed"] % 2 else "def add(a, b):\n    return a * b"}  # noqa: E731
    fallback, _, _, _ = _run("vote", {"coder": nobody}, k=3, select="visible_filter")
    assert fallback.code == "def add(a, b):\n    return a * b"  # none passes: the largest group of all


def test_vote_greedy_first_answers_a_passing_greedy_answer_without_sampling():
    greedy_good = lambda t, b: {"code": GOOD if b["temperature"] == 0 else BAD}  # noqa: E731
    prediction, _, requests, meter = _run("vote", {"coder": greedy_good}, k=5, greedy_first=True)
    _, _, baseline_requests, _ = _run("baseline", {"coder": greedy_good})
    assert prediction.code == GOOD and meter.total().calls == 1
    assert requests == baseline_requests  # the baseline's very request: its cached answer serves
    assert prediction.outcome.samples == 0 and prediction.outcome.greedy_answer == 1.0
    assert prediction.outcome.codes_to_score["samples_passed"] == []


def test_vote_greedy_first_samples_when_the_greedy_answer_fails_the_visible_examples():
    def coder(text, body):
        return {"code": BAD} if body["temperature"] == 0 else _mostly_wrong(text, body)

    prediction, history, _, meter = _run("vote", {"coder": coder}, k=5, greedy_first=True,
                                         select="visible_filter")
    assert prediction.code == GOOD and meter.total().calls == 6
    assert prediction.outcome.greedy_answer == 0.0 and prediction.outcome.samples == 5
    # The greedy answer is no sample.
    assert prediction.outcome.codes_to_score["samples_passed"] == [BAD, GOOD, BAD, BAD, GOOD]
    assert next(m for m in history if m.intent == Intent.PROPOSAL).metadata["greedy"] is True


def test_vote_selection_options_apply_to_visible_tests_only():
    with pytest.raises(UserError, match="apply to tests: visible"):
        create_pipeline("vote", tests="generated", greedy_first=True)
