"""Generated tests: parsing asserts, the samples × tests pass matrix in the real sandbox, CodeT's
consensus-set scoring on hand-made matrices, and the tests' accuracy against a reference."""

from critiquelab.eval.generated_tests import (
    canonical_passes,
    consensus_sets,
    parse_asserts,
    pass_matrix,
    render_tests,
)
from critiquelab.eval.problems import Problem

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
WRITTEN = """Here are the tests:
assert add(1, 2) == 3
assert add(0, 0) == 0
assert add(1, 2) == 3
assert add(-1, 1) == 0, "negatives"
assert isinstance(add(1, 1), int)
assert sub(1, 1) == 0
print(add(2, 2))
assert add(2, 3) == 6
"""


def test_only_plain_asserts_on_the_function_are_tests_and_duplicates_drop():
    tests = parse_asserts(WRITTEN, "add")
    assert [(t.args, t.expected) for t in tests] == [
        ("1, 2", "3"), ("0, 0", "0"), ("-1, 1", "0"), ("2, 3", "6")]
    assert len(parse_asserts(WRITTEN, "add", limit=2)) == 2
    assert parse_asserts(render_tests(tests), "add") == tests  # what a message carries reads back the same


def test_consensus_sets_score_agreeing_samples_times_tests_passed():
    # Three samples agree on passing only test 0 (score 3 × 1); two pass tests 0-3 (2 × 4).
    matrix = [
        [True, False, False, False],
        [True, True, True, True],
        [True, False, False, False],
        [True, False, False, False],
        [True, True, True, True],
        [False, False, False, False],
    ]
    best, *rest = consensus_sets(matrix)
    assert (best.samples, best.tests_passed, best.score) == ([1, 4], 4, 8)
    assert [(s.samples, s.score) for s in rest] == [([0, 2, 3], 3), ([5], 0)]


def test_ties_go_to_the_set_whose_first_sample_comes_first():
    matrix = [[False, True], [True, False], [True, False], [False, True]]
    assert consensus_sets(matrix)[0].samples == [0, 3]
    assert consensus_sets([]) == []


def test_pass_matrix_runs_each_sample_on_each_test_in_the_sandbox():
    tests = parse_asserts("assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 5) == 5", "add")
    codes = [
        "def add(a, b):\n    return a + b",
        "def add(a, b):\n    return 3",
        "def add(a, b):\n    raise ValueError('no')",
        "def add(a, b) return",  # does not compile: passes nothing
    ]
    assert pass_matrix(PROMPT, "add", codes, tests) == [
        [True, True, True], [True, False, False], [False, False, False], [False, False, False],
    ]


def test_accuracy_is_judged_by_the_reference_solution_only():
    problem = Problem(task_id="t/1", prompt=PROMPT, entry_point="add",
                      test="def check(candidate):\n    assert candidate(1, 2) == 3\n",
                      canonical_solution="    return a + b\n")
    tests = parse_asserts(WRITTEN, "add")
    assert canonical_passes(problem, tests) == [True, True, True, False]
    assert canonical_passes(problem.model_copy(update={"canonical_solution": None}), tests) is None
