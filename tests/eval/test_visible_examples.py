from critiquelab.eval.visible_examples import (
    code_feedback,
    debugging_feedback,
    execution_feedback,
    run_examples,
    visible_examples,
)


def test_doctest_examples_are_found(humaneval_problems):
    by_id = {p.task_id: p for p in humaneval_problems}
    examples = visible_examples(by_id["HumanEval/0"].prompt, "has_close_elements")
    assert [(e.args, e.expected) for e in examples] == [
        ("[1.0, 2.0, 3.0], 0.5", "False"), ("[1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3", "True"),
    ]


def test_arrow_examples_are_found():
    prompt = 'def f(x):\n    """Double.\n    f(2) ➞ 4\n    f(3) == 6\n    """\n'
    assert [(e.args, e.expected) for e in visible_examples(prompt, "f")] == [("2", "4"), ("3", "6")]


def test_most_humaneval_prompts_have_visible_examples(humaneval_problems):
    with_examples = sum(bool(visible_examples(p.prompt, p.entry_point)) for p in humaneval_problems)
    assert with_examples >= 135


def test_visible_examples_never_come_from_the_hidden_test(humaneval_problems):
    for problem in humaneval_problems:
        for example in visible_examples(problem.prompt, problem.entry_point):
            assert example.call in problem.prompt


def test_feedback_reports_pass_fail_and_exceptions():
    prompt = 'def f(x):\n    """\n    >>> f(2)\n    4\n    >>> f(0)\n    0\n    """\n'
    program = "def f(x):\n    return 8 // x\n"
    text = execution_feedback(program, "f", visible_examples(prompt, "f"))
    assert text.splitlines() == [
        "PASS: f(2) returned 4, expected 4",
        "FAIL: f(0) raised ZeroDivisionError: integer division or modulo by zero, expected 0",
    ]


def test_debugging_feedback_shows_expected_got_and_the_raising_line():
    prompt = 'def f(x):\n    """\n    >>> f(2)\n    4\n    >>> f(0)\n    0\n    >>> f(4)\n    3\n    """\n'
    program = "def f(x):\n    y = 8 // x\n    return y\n"
    runs = run_examples(program, "f", visible_examples(prompt, "f"))
    assert [run.passed for run in runs] == [True, False, False]
    assert runs[1].outcome.error_line == 2
    assert debugging_feedback(program, runs).splitlines() == [
        "1 of 3 visible examples pass.",
        "Example: f(0)",
        "  expected: 0",
        "  got: raised ZeroDivisionError: integer division or modulo by zero",
        "  raised at: y = 8 // x",
        "Example: f(4)",
        "  expected: 3",
        "  got: 2",
    ]
    passing = "def f(x):\n    return {2: 4, 0: 0, 4: 3}[x]\n"
    assert debugging_feedback(passing, run_examples(passing, "f", visible_examples(prompt, "f"))) == (
        "all 3 visible examples pass"
    )
    assert debugging_feedback(program, []) == "none (the problem shows no runnable examples)"


def test_code_feedback_runs_a_reply_and_counts_what_passed():
    prompt = 'def inc(x):\n    """\n    >>> inc(1)\n    2\n    >>> inc(5)\n    6\n    """\n'
    examples = visible_examples(prompt, "inc")
    wrong = code_feedback(prompt, "```python\ndef inc(x):\n    return 2\n```", "inc", examples)
    assert (wrong.compiles, wrong.passed, wrong.examples, wrong.all_passed) == (True, 1, 2, False)
    assert wrong.report.splitlines() == ["PASS: inc(1) returned 2, expected 2",
                                         "FAIL: inc(5) returned 2, expected 6"]
    right = code_feedback(prompt, "return x + 1", "inc", examples)
    assert (right.passed, right.all_passed) == (2, True)
    broken = code_feedback(prompt, "def inc(x) return", "inc", examples)
    assert (broken.compiles, broken.passed, broken.all_passed) == (False, 0, False)
    assert broken.report.startswith("the code does not compile: ")
