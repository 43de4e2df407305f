from eval.visible_examples import execution_feedback, visible_examples


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
