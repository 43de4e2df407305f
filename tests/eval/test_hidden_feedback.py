"""The hidden tests' report on a version of the code (positive controls only): which check
failed, on which call, and what the code returned or raised — from the trusted side."""

from __future__ import annotations

import pytest

from critiquelab.eval.execution import run_program, run_program_explained
from critiquelab.eval.hidden_feedback import ALL_PASS, hidden_test_feedback
from critiquelab.eval.problems import Problem

TEST = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    for a in range(3):\n"
    "        assert candidate(a, -a) == 0, f'zero for {a}'\n"
)
PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'
PROBLEM = Problem(task_id="t/0", prompt=PROMPT, entry_point="add", test=TEST)


def test_a_passing_version_is_one_pass_line():
    assert hidden_test_feedback(PROBLEM, PROMPT + "    return a + b\n", timeout_s=5) == ALL_PASS


def test_a_wrong_value_names_the_failing_assert_the_call_and_what_it_returned():
    report = hidden_test_feedback(PROBLEM, PROMPT + "    return a - b\n", timeout_s=5)
    assert report.splitlines() == [
        "FAIL (assertion)",
        "failing check: assert candidate(1, 2) == 3  (`candidate` is add)",
        "last call: add(1, 2)",
        "returned: -1",
    ]


def test_a_failure_inside_a_loop_names_the_loop_s_assert_and_its_message():
    report = hidden_test_feedback(PROBLEM, PROMPT + "    return 7 if a == 2 else a + b\n", timeout_s=5)
    assert report.splitlines() == [
        "FAIL (assertion): zero for 2",
        "failing check: assert candidate(a, -a) == 0, f'zero for {a}'  (`candidate` is add)",
        "last call: add(2, -2)",
        "returned: 7",
    ]


def test_an_exception_names_its_type_and_message():
    report = hidden_test_feedback(PROBLEM, PROMPT + "    return {}[a]\n", timeout_s=5)
    assert report.startswith("FAIL (exception): KeyError: 1")
    assert "last call: add(1, 2)" in report and "raised: KeyError: 1" in report


@pytest.mark.parametrize("code", ["", "I cannot solve this."])
def test_a_reply_without_code_says_so_without_running(code):
    report = hidden_test_feedback(PROBLEM, code, timeout_s=5)
    assert report == "FAIL (no_code): the reply holds no code to test."


def test_explaining_leaves_the_verdict_as_scoring_gives_it():
    program = PROMPT + "    return a - b\n"
    verdict, why = run_program_explained(program, TEST, "add", timeout_s=5, prompt=PROMPT)
    plain = run_program(program, TEST, "add", timeout_s=5, prompt=PROMPT)
    assert (verdict.status, verdict.reason, verdict.detail) == (plain.status, plain.reason, plain.detail)
    assert why.test_line == "assert candidate(1, 2) == 3" and why.returned == "-1"
