"""Execution-grounded debate and the judge rule, with a scripted LM (real HTTP and adapters).

The scripted debaters behave as a small model does: without evidence they follow the majority of
the solutions they read; grounded, they keep a solution whose results on the visible examples
pass and adopt one that passes when theirs fails. The scripted judge, likewise, follows the
transcript unless it is shown results.
"""

import itertools
import json
import re

import pytest
from test_debate_and_vote import BAD, GOOD, _run

from critiquelab.pipelines.debate.grounding import RESULTS_HEADING, rule_override
from critiquelab.runtime.pool.messages import Intent

_CODE = re.compile(r"```python\n(.*?)\n```(?:\nOn the examples shown in the problem:\n(\S+))?", re.DOTALL)


def _request(text: str) -> str:
    """The user message of a request (the text after the system message's field templates)."""
    return text.rsplit("[[ ## prompt ## ]]", 1)[1].split("Respond with the corresponding output fields", 1)[0]


def _others(request: str) -> list[tuple[str, str | None]]:
    """The neighbours' solutions a debater's request holds, each with its first result mark."""
    section = request.split("[[ ## others ## ]]", 1)[1].split("[[ ## own_results ## ]]", 1)[0]
    return [(code, mark) for code, mark in _CODE.findall(section)]


def _debater(text, body):
    request = _request(text)
    own = request.split("[[ ## own_code ## ]]", 1)[1].split("[[ ## others ## ]]", 1)[0].strip()
    own = own.removeprefix("```python\n").removesuffix("\n```")
    others = _others(request)
    if "[[ ## own_results ## ]]" in request:
        results = request.split("[[ ## own_results ## ]]", 1)[1]
        if results.lstrip().startswith("PASS"):
            return {"argument": "mine passes the examples", "revised_code": own}
        passing = [code for code, mark in others if mark == "PASS:"]
        return {"argument": "theirs passes the examples", "revised_code": passing[0] if passing else own}
    # Ungrounded: the majority of what it reads wins (two wrong neighbours outvote a right one).
    codes = [code for code, _ in others]
    majority = max(set(codes), key=codes.count)
    return {"argument": "the others agree", "revised_code": majority if codes.count(majority) > 1 else own}


def _judge(text, body):
    proposals = _request(text).split("[[ ## proposals ## ]]", 1)[1].split("[[ ## transcript ## ]]", 1)[0]
    marks = re.findall(rf"{RESULTS_HEADING}\n(\S+)", proposals)
    # grounded: the first solution whose results pass; ungrounded: the last one (a wrong one here)
    choice = next((i + 1 for i, m in enumerate(marks) if m == "PASS:"), 1) if marks else 3
    return {"choice": str(choice), "rationale": "as argued", "merged_code": ""}


def _scripts(first=(GOOD, BAD, BAD), judge=_judge):
    def coder(text, body):  # debater index = seed % 100 (sampling_config)
        return {"code": first[body["seed"] % 100]}

    return {"coder": coder, "debater": _debater, "judge": judge}


def test_a_passing_proposal_is_argued_away_without_grounding():
    prediction, history, _, _ = _run("debate", _scripts(), debaters=3, rounds=1)
    assert prediction.outcome.codes_to_score["debaters_first_passed"] == [GOOD, BAD, BAD]
    assert prediction.outcome.codes_to_score["debaters_final_passed"] == [BAD, BAD, BAD]
    assert prediction.code == BAD
    assert not any("visible_report" in m.metadata for m in history)
    assert prediction.outcome.rule_override is None  # no rule: not measured


def test_grounded_debaters_keep_the_passing_proposal_and_the_judge_reads_results():
    prediction, history, requests, _ = _run("debate", _scripts(), debaters=3, rounds=1,
                                            execution_feedback=True)
    assert prediction.outcome.codes_to_score["debaters_final_passed"] == [GOOD, GOOD, GOOD]
    assert prediction.code == GOOD
    # Every proposal and revision was run on the visible example, and says so on the pool.
    coded = sorted((m for m in history if m.intent in (Intent.PROPOSAL, Intent.ARGUMENT)),
                   key=lambda m: (m.metadata["round"], m.metadata["debater"]))  # published in parallel
    assert [m.metadata["visible_passed"] for m in coded] == [True, False, False, True, True, True]
    assert "FAIL: add(1, 2) returned -1, expected 3" in coded[1].metadata["visible_report"]
    judge = next(m for m in history if m.intent == Intent.VERDICT).metadata["trace"]["inputs"]["proposals"]
    assert judge.count("PASS: add(1, 2) returned 3, expected 3") == 3
    debater_requests = [r for r in requests if "own_results" in str(r)]
    assert len(debater_requests) == 3


def test_grounded_debaters_read_a_raising_call_as_what_it_raised():
    raising = "def add(a: int, b: int) -> int:\n    raise ValueError('no')"
    _, history, _, _ = _run("debate", _scripts(first=(raising, GOOD, GOOD)), debaters=3, rounds=1,
                            execution_feedback=True)
    first = next(m for m in history if m.intent == Intent.PROPOSAL and m.metadata["debater"] == 0)
    assert first.metadata["visible_report"] == "FAIL: add(1, 2) raised ValueError: no, expected 3"
    revised = next(m for m in history if m.intent == Intent.ARGUMENT and m.metadata["debater"] == 0)
    assert revised.content == GOOD  # its own results failed: it adopted a passing neighbour's


def _always(choice, merged=""):
    return lambda text, body: {"choice": str(choice), "rationale": "as argued", "merged_code": merged}


@pytest.mark.parametrize("grounded", [False, True])
def test_the_judge_rule_replaces_a_visibly_failing_choice_with_a_passing_solution(grounded):
    scripts = _scripts(first=(BAD, GOOD, BAD), judge=_always(1))
    prediction, history, _, _ = _run("debate", scripts, debaters=3, rounds=0,
                                     execution_feedback=grounded, judge_rule="visible_pass")
    verdict = history[-1]
    assert verdict.metadata["decision"] == "chosen" and verdict.metadata["choice"] == 1
    assert verdict.metadata["rule_override"] == 1
    assert prediction.code == GOOD and prediction.outcome.rule_override is True
    off, _, _, _ = _run("debate", scripts, debaters=3, rounds=0, execution_feedback=grounded)
    assert off.code == BAD  # the same debate without the rule keeps the judge's choice


def test_the_judge_rule_replaces_a_failing_merge_and_keeps_a_passing_choice():
    wrong_merge = "def add(a: int, b: int) -> int:\n    return a * b"
    merged, _, _, _ = _run("debate", _scripts(first=(BAD, BAD, GOOD), judge=_always(1, wrong_merge)),
                           debaters=3, rounds=0, judge_rule="visible_pass")
    assert merged.outcome.judge_decision == "merged" and merged.code == GOOD
    kept, history, _, _ = _run("debate", _scripts(first=(BAD, GOOD, GOOD), judge=_always(3)),
                               debaters=3, rounds=0, judge_rule="visible_pass")
    assert kept.code == GOOD and kept.outcome.rule_override is False
    assert history[-1].metadata["rule_override"] is None


def test_the_judge_rule_lets_the_judge_decide_when_no_solution_passes():
    wrong = "def add(a: int, b: int) -> int:\n    return 0"
    prediction, _, _, _ = _run("debate", _scripts(first=(BAD, wrong, BAD), judge=_always(2)),
                               debaters=3, rounds=0, judge_rule="visible_pass")
    assert prediction.code == wrong and prediction.outcome.rule_override is False


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_the_rule_never_picks_a_failing_solution_while_one_passes(count):
    for chosen in (False, True):
        for finals in itertools.product((False, True), repeat=count):
            override = rule_override(chosen, list(finals))
            if chosen or not any(finals):
                assert override is None
            else:
                assert override is not None and finals[override]


def test_ungrounded_requests_are_those_of_a_debate_without_the_params():
    plain = _run("debate", _scripts(), debaters=3, rounds=1)[2]
    with_defaults = _run("debate", _scripts(), debaters=3, rounds=1, execution_feedback=False,
                         judge_rule="none")[2]
    assert sorted(map(json.dumps, plain)) == sorted(map(json.dumps, with_defaults))  # sent in parallel
    assert not any(RESULTS_HEADING in str(r) or "own_results" in str(r) for r in plain)



def test_code_pasted_into_an_argument_is_not_passed_on():
    pasted = f"Mine adds, here it is:\n```python\n{GOOD}\n```\nIt returns the sum."
    scripts = {**_scripts(first=(GOOD, GOOD, GOOD), judge=_always(1)),
               "debater": lambda text, body: {"argument": pasted, "revised_code": GOOD}}
    _, history, _, _ = _run("debate", scripts, debaters=3, rounds=2)
    arguments = [m for m in history if m.intent == Intent.ARGUMENT]
    assert {m.metadata["argument"] for m in arguments} == {"Mine adds, here it is:"}
    assert arguments[0].metadata["trace"]["outputs"]["argument"] == pasted  # the trace keeps the reply
    second_round = [m for m in arguments if m.metadata["round"] == 2]
    assert all(m.metadata["trace"]["inputs"]["others"].count("```python") == 2 for m in second_round)
    transcript = history[-1].metadata["trace"]["inputs"]["transcript"]
    assert "```" not in transcript and transcript.count("Mine adds") == 6
