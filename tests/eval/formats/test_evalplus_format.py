"""EvalPlus rows: inputs checked against the canonical solution's outputs, computed on the
trusted side; scored through the real sandbox."""

import json
from pathlib import Path

import pytest

from critiquelab.eval.datasets import load_problems
from critiquelab.eval.sandbox.reference import same_output
from critiquelab.eval.scoring import score_code
from critiquelab.eval.visible_examples import visible_examples

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def problems():
    return {p.entry_point: p for p in load_problems(str(DATA / "evalplus.jsonl"), dataset_format="evalplus")}


def _score(problem, code, timeout_s=5.0):
    return score_code(problem, code, timeout_s)[1]


def test_canonical_solutions_pass(problems):
    for problem in problems.values():
        assert _score(problem, problem.canonical_solution).passed, problem.task_id


def test_prompt_is_the_datasets_own_and_shows_no_hidden_input(problems):
    running = problems["running_max"]
    assert running.prompt.startswith("def running_max(numbers: list) -> list:\n")
    assert "48213" not in running.prompt and "987654" not in running.prompt
    assert [(e.call, e.expected) for e in visible_examples(running.prompt, "running_max")] == [
        ("running_max([1, 3, 2])", "[1, 3, 3]")]
    signed = problems["signed_text"]  # MBPP+: the task and its first assert in a docstring
    assert [(e.args, e.expected) for e in visible_examples(signed.prompt, "signed_text")] == [("3", "'+3'")]


def test_plus_inputs_catch_what_the_base_inputs_miss(problems):
    starts_at_zero = (
        "def running_max(numbers):\n    best, out = 0, []\n    for n in numbers:\n"
        "        best = max(best, n)\n        out.append(best)\n    return out\n"
    )
    verdict = _score(problems["running_max"], starts_at_zero)
    assert verdict.status == "failed" and verdict.reason == "assertion"
    assert "hidden input 4 of 6" in verdict.detail
    assert "-9" not in verdict.detail and "48213" not in verdict.detail  # position, never values


def test_ints_stay_ints(problems):
    # '+0' and '+3.0' differ from the reference's '0' and '+3': the inputs reach both sides as written.
    assert not _score(problems["signed_text"], "def signed_text(n):\n    return f'{n:+}'\n").passed
    floaty = "def signed_text(n):\n    n = float(n)\n    return ('+' if n > 0 else '') + str(n)\n"
    assert not _score(problems["signed_text"], floaty).passed


def test_atol_accepts_rounding_and_nothing_more(problems):
    problem = problems["mean_absolute_deviation"]
    body = "    mean = sum(values) / len(values)\n    return sum(abs(v - mean) for v in values) / len(values)"
    assert _score(problem, body + " + 1e-9\n").passed
    verdict = _score(problem, body + " + 1e-3\n")
    assert verdict.status == "failed" and verdict.reason == "assertion"


def test_the_candidate_cannot_reach_the_expected_outputs(problems):
    """They live in the trusted checker; the candidate's process has nothing to find."""
    snoop = (
        "import gc, sys\n"
        "def running_max(numbers):\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and '_EXPECTED' in o:\n"
        "            return o['_EXPECTED'][0]\n"
        "    return 'nothing found'\n"
    )
    verdict = _score(problems["running_max"], snoop)
    assert verdict.status == "failed" and verdict.reason == "assertion"
    assert "hidden input 1 of 6" in verdict.detail


def _write(tmp_path, **changes):
    row = json.loads((DATA / "evalplus.jsonl").read_text().splitlines()[0])
    row.update(changes)
    path = tmp_path / "plus.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return load_problems(str(path))[0]


def test_a_reference_that_raises_is_a_dataset_error_not_a_candidate_failure(tmp_path):
    problem = _write(tmp_path, canonical_solution="    return [1 // (len(numbers) - 1)]\n")
    verdict = _score(problem, problem.canonical_solution)
    assert verdict.status == "error" and verdict.reason == "test_setup"
    assert "the reference solution raised ZeroDivisionError on hidden input 2" in verdict.detail


def test_computing_expected_outputs_does_not_use_the_candidates_time(tmp_path):
    slow = ("    import time\n    time.sleep(0.3)\n"
            "    return [max(numbers[: i + 1]) for i in range(len(numbers))]\n")
    problem = _write(tmp_path, canonical_solution=slow, plus_input=[[[4, 1]]])  # 4 inputs: 1.2 s
    fast = "def running_max(numbers):\n    return [max(numbers[: i + 1]) for i in range(len(numbers))]\n"
    assert _score(problem, fast, timeout_s=1.0).passed


@pytest.mark.parametrize(
    ("actual", "expected", "atol", "same"),
    [
        ([1, 2], [1, 2], 0, True),
        (0.30000000000000004, 0.3, 0, True),  # floats get atol 1e-6 even when the dataset says 0
        (0.3001, 0.3, 0, False),
        ([0.1 + 0.2, 1.0], [0.3, 1.0], 0, True),
        (2, 2.0000001, 0, False),  # an int where the reference returns a float
        (1.5, 1.0, 1.0, True),
        ((1.0, 2.0), [1.0, 2.0], 1e-6, False),  # with a tolerance the types must match, as in EvalPlus
        ([1.0, 2.0], [1.0], 1e-6, False),
        (float("nan"), float("nan"), 1e-6, False),
        ([[1.0, 2.0]], [[1.0, 2.0000001]], 1e-6, True),
        ("a", "b", 1e-6, False),
        (True, 1.0, 0, True),  # Python equality, as in EvalPlus
    ],
)
def test_same_output_follows_evalplus(actual, expected, atol, same):
    assert same_output(actual, expected, atol) is same
