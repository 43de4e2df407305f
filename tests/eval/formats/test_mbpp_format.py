"""MBPP rows become HumanEval-shaped problems; scored through the real sandbox."""

from pathlib import Path

import pytest

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import load_problems
from critiquelab.eval.execution import ExecutionJob, run_many
from critiquelab.eval.scoring import score_code
from critiquelab.eval.visible_examples import visible_examples

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def problems():
    return load_problems(str(DATA / "mbpp.jsonl"), dataset_format="mbpp")


def test_prompt_is_the_reference_signature_the_text_and_the_first_test(problems):
    first = problems[0]
    assert first.task_id == "1" and first.entry_point == "digit_square_sum"
    assert first.prompt == (
        "def digit_square_sum(n):\n"
        '    """Write a function to return the sum of the squares of the digits of a '
        "non-negative integer.\n\n"
        "    Example:\n"
        "    assert digit_square_sum(123) == 14\n"
        '    """\n'
    )
    # Hidden tests are not in the prompt; the reference code is not either.
    assert "9091" not in first.prompt and "str(n)" not in first.prompt


def test_entry_point_is_the_function_the_tests_call_not_a_helper(problems):
    square = next(p for p in problems if p.task_id == "8")
    assert square.entry_point == "is_perfect_square"
    assert square.prompt.startswith("def is_perfect_square(n):\n")
    assert "_integer_root" not in square.prompt


def test_check_runs_every_assert_after_the_setup_code(problems):
    vowels = next(p for p in problems if p.task_id == "3")
    assert vowels.test.startswith("PANGRAM = 'The quick brown fox jumps over the lazy dog'\n")
    assert "    count_vowels = candidate\n    assert count_vowels('Programming') == 3\n" in vowels.test
    assert "assert count_vowels('rhythm') == 0" in vowels.test


def test_challenge_tests_only_when_asked(problems):
    plain = next(p for p in problems if p.task_id == "4")
    assert "2880067194370816120" not in plain.test
    challenged = load_problems(str(DATA / "mbpp.jsonl"), challenge_tests=True, task_ids=["4"])[0]
    assert "    assert fib(90) == 2880067194370816120\n" in challenged.test
    assert challenged.prompt == plain.prompt
    slow = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    assert score_code(plain, slow, 5.0)[1].passed
    assert score_code(challenged, slow, 2.0)[1].status == "timed_out"


def test_parquet_gives_the_same_problems(problems):
    assert load_problems(str(DATA / "mbpp.parquet")) == problems


def test_canonical_solutions_pass_and_broken_ones_fail_in_the_sandbox(problems):
    jobs = [ExecutionJob(score_code(p, p.canonical_solution, 5.0)[0].source, p.test, p.entry_point,
                         5.0, prompt=p.prompt) for p in problems]
    assert [v.status for v in run_many(jobs)] == ["passed"] * len(problems)
    vowels = next(p for p in problems if p.task_id == "3")
    # Right on the shown example ('Programming'), wrong on the hidden ones (counts 'y').
    broken = "def count_vowels(text):\n    return sum(ch in 'aeiouy' for ch in text.lower())\n"
    verdict = score_code(vowels, broken, 5.0)[1]
    assert verdict.status == "failed" and verdict.reason == "assertion"
    body_only = "return sum(int(d) ** 2 for d in str(n))"  # a reply completing the stub
    assert score_code(problems[0], body_only, 5.0)[1].passed


def test_visible_examples_are_the_shown_test_only(problems):
    found = {p.task_id: [(e.call, e.expected) for e in visible_examples(p.prompt, p.entry_point)]
             for p in problems}
    assert found["1"] == [("digit_square_sum(123)", "14")]
    assert found["7"] == [("second_largest([4, 1, 4, 3])", "3")]
    assert found["8"] == [("is_perfect_square(16)", "True")]
    assert found["2"] == [] and found["5"] == []  # set(f(…)) / math.isclose(f(…)): no value to expect
    for problem in problems:
        for example in visible_examples(problem.prompt, problem.entry_point):
            assert example.call in problem.prompt


def test_text_with_backslashes_and_quotes_stays_verbatim(tmp_path):
    import json

    row = {"task_id": 9, "text": 'Write a function to split on "\\d+" runs, like r"a1b" -> ["a", "b"].',
           "code": "import re\ndef split_digits(s):\n    return [p for p in re.split(r'\\d+', s) if p]",
           "test_list": ["assert split_digits('a1b22c') == ['a', 'b', 'c']"]}
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(row) + "\n")
    problem = load_problems(str(path))[0]
    assert row["text"] in problem.prompt
    assert score_code(problem, problem.canonical_solution, 5.0)[1].passed


def test_sanitized_mbpp_with_test_imports(tmp_path):
    import json

    row = {"task_id": 10, "prompt": "Write a function to return the hypotenuse of a right triangle.",
           "code": "import math\ndef hypotenuse(a, b):\n    return math.sqrt(a * a + b * b)",
           "test_imports": ["import math"],
           "test_list": ["assert math.isclose(hypotenuse(3, 4), 5.0)", "assert hypotenuse(0, 0) == 0"]}
    path = tmp_path / "sanitized.jsonl"
    path.write_text(json.dumps(row) + "\n")
    problem = load_problems(str(path), {"text": "prompt"})[0]
    assert problem.test.startswith("import math\n")
    assert score_code(problem, problem.canonical_solution, 5.0)[1].passed
    assert not score_code(problem, "def hypotenuse(a, b):\n    return a + b\n", 5.0)[1].passed


# MBPP+'s `test` column: a program over base and plus inputs calling the function by name, with
# helpers of its own; the multi-line string checks that it runs exactly as written.
_PLUS_PROGRAM = '''import math

def assertion(out, exp, atol):
    assert out == exp or math.isclose(out, exp, abs_tol=atol), f"{out!r} != {exp!r}"

BANNER = """two
lines"""
inputs = [[3, 4], [0, 0], [-2, 5]]
results = [7, 0, 3]
for i, (inp, exp) in enumerate(zip(inputs, results)):
    assertion(add(*inp), exp, 0)
assert BANNER.splitlines() == ["two", "lines"]
'''
_PLUS_ROW = {"task_id": 11, "prompt": "Write a function to add two integers.",
             "code": "def add(a, b):\n    return a + b", "test_imports": [],
             "test_list": ["assert add(1, 2) == 3"], "test": _PLUS_PROGRAM}
_PLUS_FIELDS = {"text": "prompt", "test_program": "test"}


def _plus_problem(tmp_path, row=None, **options):
    import json

    path = tmp_path / "mbppplus.jsonl"
    path.write_text(json.dumps(row or _PLUS_ROW) + "\n")
    return load_problems(str(path), _PLUS_FIELDS, dataset_format="mbpp", **options)[0]


def test_test_program_is_the_hidden_test_in_place_of_the_asserts(tmp_path):
    problem = _plus_problem(tmp_path)
    assert problem.prompt.startswith("def add(a, b):\n") and "assert add(1, 2) == 3" in problem.prompt
    assert "assert add(1, 2) == 3" not in problem.test  # the program holds the base inputs itself
    assert score_code(problem, problem.canonical_solution, 5.0)[1].passed
    # Right on the shown example and the base asserts, wrong on a plus input (negative numbers).
    wrong = "def add(a, b):\n    return abs(a) + abs(b)\n"
    verdict = score_code(problem, wrong, 5.0)[1]
    assert verdict.status == "failed" and verdict.reason == "assertion"


def test_test_program_goes_with_challenge_tests_and_is_checked(tmp_path):
    row = {**_PLUS_ROW, "challenge_test_list": ["assert add(10**20, 1) == 10**20 + 1"]}
    problem = _plus_problem(tmp_path, row, challenge_tests=True)
    assert problem.test.rstrip().endswith("assert add(10**20, 1) == 10**20 + 1")
    assert score_code(problem, problem.canonical_solution, 5.0)[1].passed
    with pytest.raises(UserError, match="field 'test' is empty"):
        _plus_problem(tmp_path, {**_PLUS_ROW, "test": "  \n"})
    with pytest.raises(UserError, match="field 'test' is not valid Python"):
        _plus_problem(tmp_path, {**_PLUS_ROW, "test": "for x in:\n"})
    # a program that cannot fail an answer (the asserts it replaces are not run): every answer passes
    with pytest.raises(UserError, match="field 'test' holds no assert, raise or assert…"):
        _plus_problem(tmp_path, {**_PLUS_ROW, "test": "for x in [1, 2]:\n    add(x, x)\n"})
