"""distinguish against a scripted LM over real HTTP: a greedy answer that passes the weak visible
example but not a generated input is replaced when the judge (or agreement) says so; unusable
inputs fall back to the visible-example rule; agreeing candidates cost no judge call; and with
check_samples 0 it asks and answers exactly what vote's greedy_first does."""

import json

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
SWAPPED = "def add(a: int, b: int) -> int:\n    return b + a"  # another program, the same behaviour
CONSTANT = "def add(a: int, b: int) -> int:\n    return 3"  # right on the visible example only
BAD = "def add(a: int, b: int) -> int:\n    return a - b"
MULTIPLY = "def add(a: int, b: int) -> int:\n    return a * b + 1"  # also 3 on the visible example
INPUTS = ["add(2, 2)", "add(0, 0)"]


def _coder(greedy, samples):
    """The greedy answer (temperature 0), and sample i (seed base * 1000 + i) from ``samples``."""
    def coder(text, body):
        return {"code": greedy if body["temperature"] == 0 else samples[body["seed"] % 1000 % len(samples)]}
    return coder


def _scripts(coder, inputs=INPUTS, choice="B"):
    return {
        "coder": coder,
        "input_writer": lambda t, b: inputs if isinstance(inputs, str) else {"inputs": json.dumps(inputs)},
        "pairwise_judge": lambda t, b: {"right_output": choice, "reason": "add(2, 2) is 4"},
    }


def _run(name, scripts, **params):
    pool, meter = MessagePool(), UsageMeter()
    with FakeOpenAIServer(role_responder(scripts, with_body=True), pass_body=True) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base, api_key="x",
                       temperature=0.0, max_tokens=200, num_retries=0, seed=7)
        pipeline = create_pipeline(name, **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool), metering(meter):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
        requests = list(fake.requests)
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), requests, meter


def _of_role(requests, marker):
    return ["\n".join(m["content"] for m in r["messages"]) for r in requests
            if marker in r["messages"][0]["content"]]


def test_a_generated_input_exposes_the_greedy_answer_and_the_judge_replaces_it():
    # The greedy answer and sample 3 return 3 whatever the input; samples 0-2 add.
    coder = _coder(CONSTANT, [GOOD, SWAPPED, GOOD, CONSTANT])
    prediction, history, requests, meter = _run("distinguish", _scripts(coder))
    assert prediction.code == GOOD
    assert prediction.outcome.figures() == {
        "samples": 4, "greedy_passed_visible": True, "visible_passing": 5, "inputs_written": 2,
        "inputs_kept": 2, "inputs_dropped": 0, "groups": 2, "disagreements": 2, "judge_calls": 1,
        "selection": "pairwise", "chosen": 1, "greedy_replaced": True, "messages": len(history),
    }
    assert prediction.outcome.codes_to_score == {
        "candidates_passed": [CONSTANT, GOOD, SWAPPED, GOOD, CONSTANT]
    }
    assert meter.by_role["coder"].calls == 5
    assert meter.by_role["input_writer"].calls == meter.by_role["pairwise_judge"].calls == 1
    # The judge sees the first generated input and the two groups' outputs on it, the greedy's as A.
    (asked,) = _of_role(requests, "`right_output`")
    assert "add(2, 2)" in asked and "output_a ## ]]\n3" in asked and "output_b ## ]]\n4" in asked
    (written,) = _of_role(requests, "`inputs`")
    assert PROMPT.strip() in written and "n_inputs ## ]]\n10" in written
    verdict = history[-1]
    assert verdict.intent == Intent.VERDICT and verdict.metadata["inputs"] == ["1, 2", "2, 2", "0, 0"]
    assert [g["members"] for g in verdict.metadata["groups"]] == [[0, 4], [1, 2, 3]]
    assert verdict.metadata["judgements"] == [{"a": 0, "b": 1, "input": 1, "choice": "B"}]
    assert verdict.metadata["agreement_choice"] == 1  # the larger group agrees with the judge


def test_a_judge_that_prefers_the_greedy_output_keeps_it():
    coder = _coder(CONSTANT, [GOOD, SWAPPED, GOOD, CONSTANT])
    prediction, _, _, _ = _run("distinguish", _scripts(coder, choice="A"))
    assert prediction.code == CONSTANT and prediction.outcome.greedy_replaced is False
    assert prediction.outcome.judge_calls == 1


@pytest.mark.parametrize(("samples", "selection", "expected", "judge_calls"), [
    ([GOOD, SWAPPED, GOOD, CONSTANT], "agreement", GOOD, 0),  # the majority adds: replaced
    ([GOOD, CONSTANT, CONSTANT, CONSTANT], "agreement", CONSTANT, 0),  # the majority is the greedy's
    ([GOOD, SWAPPED, GOOD, CONSTANT], "both", GOOD, 1),  # judge and agreement pick the adders
    ([GOOD, CONSTANT, CONSTANT, CONSTANT], "both", CONSTANT, 1),  # the judge alone cannot replace it
])
def test_agreement_and_both(samples, selection, expected, judge_calls):
    prediction, _, _, _ = _run("distinguish", _scripts(_coder(CONSTANT, samples)), selection=selection)
    assert prediction.code == expected and prediction.outcome.judge_calls == judge_calls
    assert prediction.outcome.greedy_replaced is (expected != CONSTANT)
    assert prediction.outcome.selection == selection


def _adding_judge(text, body):
    """A judge that knows addition: the output equal to the call's sum is right."""
    call = text.rsplit("call ## ]]\n", 1)[1].split("\n", 1)[0]
    a, b = (int(x) for x in call.removeprefix("add(").removesuffix(")").split(","))
    output_a = text.rsplit("output_a ## ]]\n", 1)[1].split("\n", 1)[0]
    return {"right_output": "A" if output_a == str(a + b) else "B", "reason": f"{a} + {b} = {a + b}"}


def test_several_groups_meet_in_turn_the_winner_meeting_the_next():
    # On add(1, 2) all return 3; on add(2, 3) the constant 3, the adders 5, a*b+1 7.
    coder = _coder(CONSTANT, [GOOD, MULTIPLY, GOOD, SWAPPED])
    scripts = {**_scripts(coder, inputs=["add(2, 3)"]), "pairwise_judge": _adding_judge}
    prediction, history, _, _ = _run("distinguish", scripts)
    assert prediction.code == GOOD and prediction.outcome.judge_calls == 2
    verdict = history[-1].metadata
    assert [g["members"] for g in verdict["groups"]] == [[0], [1, 3, 4], [2]]  # the greedy's, then by size
    assert [(j["a"], j["b"], j["choice"]) for j in verdict["judgements"]] == [(0, 1, "B"), (1, 2, "A")]


@pytest.mark.parametrize("written", [
    ["add(1)", "add(1, 2, 3)", "sub(1, 2)", "add(x, 1)", "add(*[1, 2])", "print('hi')", "add(c=1, a=2)",
     "add(1, 2)"],
    "I would rather not write any inputs.",  # no list at all: the adapters cannot parse it
])
def test_unusable_inputs_are_dropped_and_the_visible_example_rule_answers(written):
    coder = _coder(CONSTANT, [GOOD, SWAPPED, GOOD, CONSTANT])
    prediction, _, _, meter = _run("distinguish", _scripts(coder, inputs=written))
    assert prediction.code == CONSTANT  # the greedy answer passes the visible example: it stands
    metrics = prediction.outcome.figures()
    assert metrics["selection"] == "no_inputs" and metrics["judge_calls"] == 0 and metrics["inputs_kept"] == 0
    assert not metrics["greedy_replaced"] and "pairwise_judge" not in meter.by_role
    if isinstance(written, list):  # add(1, 2) repeats the visible example: neither kept nor dropped
        assert (metrics["inputs_written"], metrics["inputs_dropped"]) == (8, 7)
    else:
        assert metrics["inputs_dropped"] == metrics["inputs_written"] == 1
    assert metrics["groups"] == 1  # on the visible example alone every candidate returns 3


def test_candidates_that_all_agree_need_no_judge():
    coder = _coder(GOOD, [SWAPPED, GOOD])
    prediction, _, _, meter = _run("distinguish", _scripts(coder))
    assert prediction.code == GOOD and prediction.outcome.selection == "one_group"
    assert prediction.outcome.groups == 1 and prediction.outcome.disagreements == 0
    assert meter.by_role["input_writer"].calls == 1 and "pairwise_judge" not in meter.by_role


def _same_requests(a, b):  # as multisets: samples are drawn in parallel, so they arrive in any order
    return sorted(json.dumps(r, sort_keys=True) for r in a) == sorted(json.dumps(r, sort_keys=True)
                                                                      for r in b)


@pytest.mark.parametrize(("greedy", "samples"), [
    (GOOD, [BAD]),  # the greedy answer passes: it is the answer, one call, no sample
    (BAD, [BAD, GOOD, BAD, GOOD, BAD]),  # it fails: k samples, the passing ones one program
])
def test_check_samples_zero_asks_and_answers_as_vote_greedy_first(greedy, samples):
    scripts = _scripts(_coder(greedy, samples))
    mine, _, my_requests, my_meter = _run("distinguish", scripts, check_samples=0, k=5)
    vote, _, vote_requests, vote_meter = _run("vote", scripts, k=5, greedy_first=True,
                                              select="visible_filter")
    assert mine.code == vote.code == GOOD
    assert my_meter.total().calls == vote_meter.total().calls == (1 if greedy == GOOD else 6)
    assert _same_requests(my_requests, vote_requests)
    assert mine.outcome.judge_calls == mine.outcome.inputs_written == 0


def test_mutated_examples_expose_the_greedy_answer_with_no_input_writer_call():
    """add(1, 2) mutated (add(0, 2), add(2, 2), ...) tells the constant from the adders: agreement
    replaces the greedy answer, and the input writer is never asked."""
    coder = _coder(CONSTANT, [GOOD, SWAPPED, GOOD, CONSTANT])
    prediction, history, requests, meter = _run("distinguish", _scripts(coder), selection="agreement",
                                                input_source="mutation", n_inputs=4)
    assert prediction.code == GOOD and prediction.outcome.greedy_replaced is True
    assert "input_writer" not in meter.by_role and not _of_role(requests, "`inputs`")
    (inputs,) = [m for m in history if m.intent == Intent.GENERATED_INPUTS]
    assert inputs.metadata["args"] == ["0, 2", "1, 0", "2, 2", "1, 3"]  # each argument in turn
    assert inputs.metadata["written"] == 0 and inputs.metadata["mutated"] == 4


def test_both_sources_add_the_mutations_after_the_writers_inputs():
    coder = _coder(CONSTANT, [GOOD, SWAPPED, GOOD, CONSTANT])
    _, history, _, meter = _run("distinguish", _scripts(coder, inputs=["add(2, 2)"]),
                                input_source="both", n_inputs=2)
    assert meter.by_role["input_writer"].calls == 1
    (inputs,) = [m for m in history if m.intent == Intent.GENERATED_INPUTS]
    assert inputs.metadata["args"] == ["2, 2", "0, 2", "1, 0"]  # the writer's, then new mutations
