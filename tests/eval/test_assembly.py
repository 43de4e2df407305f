import pytest

from critiquelab.eval.assembly import assemble_program, extract_code, prompt_preamble

PROMPT = '''import math


def helper(x):
    return x * 2


def solve(n: int) -> int:
    """Return helper(n) + 1.
    >>> solve(2)
    5
    """
'''


def _run(source: str, call: str) -> object:
    namespace: dict = {}
    exec(compile(source, "t", "exec"), namespace)
    return eval(call, namespace)


def test_fenced_full_function_keeps_prompt_imports_and_helpers():
    reply = (
        "Here you go:\n```python\ndef solve(n: int) -> int:\n"
        "    return helper(n) + int(math.sqrt(1))\n```\nDone."
    )
    program = assemble_program(PROMPT, reply, "solve")
    assert program.ok
    assert "def helper" in program.source and "import math" in program.source
    assert _run(program.source, "solve(2)") == 5


def test_body_only_reply_is_indented_under_the_prompt():
    program = assemble_program(PROMPT, "return helper(n) + 1", "solve")
    assert program.ok
    assert _run(program.source, "solve(3)") == 7


def test_body_with_its_own_indentation():
    program = assemble_program(PROMPT, "    y = helper(n)\n    return y + 1\n", "solve")
    assert _run(program.source, "solve(1)") == 3


def test_raw_text_with_prose_around_code():
    reply = (
        "Sure! The answer is:\ndef solve(n):\n    return helper(n) + 1\n"
        "This works because helper doubles."
    )
    program = assemble_program(PROMPT, reply, "solve")
    assert program.ok, program.syntax_error
    assert _run(program.source, "solve(0)") == 1


def test_demo_code_is_dropped():
    reply = (
        "```python\ndef solve(n):\n    return helper(n) + 1\n\nprint(solve(2))\n"
        "assert solve(2) == 99\nif __name__ == '__main__':\n    raise SystemExit(1)\n```"
    )
    program = assemble_program(PROMPT, reply, "solve")
    assert "print(" not in program.source and "__main__" not in program.source
    assert _run(program.source, "solve(2)") == 5


def test_a_demo_sharing_a_line_keeps_the_statements_beside_it():
    """``K = 3; print(K)``: the assignment the solution needs stays, only the demo goes."""
    reply = (
        "```python\nK = 3; print(K); print(\n  K)\nprint('é'); OFFSET = 1  # é\n"
        "def solve(n):\n    return helper(n) - K + 3 + OFFSET - 1 + 1\n\nprint(solve(2)); assert False\n```"
    )
    program = assemble_program(PROMPT, reply, "solve")
    assert "print(" not in program.source and "assert" not in program.source
    assert "K = 3; pass; pass" in program.source and "pass; OFFSET = 1  # é" in program.source
    assert _run(program.source, "solve(2)") == 5


def test_block_defining_entry_point_is_chosen_among_several():
    reply = "```python\nx = solve(1)\n```\n```python\ndef solve(n):\n    return 0\n```"
    assert extract_code(reply, "solve").startswith("def solve")


def test_unterminated_fence_still_yields_code():
    reply = "```python\ndef solve(n):\n    return helper(n) + 1\n"
    assert _run(assemble_program(PROMPT, reply, "solve").source, "solve(1)") == 3


def test_syntax_error_is_reported_not_raised():
    program = assemble_program(PROMPT, "```python\ndef solve(n):\n    return (\n```", "solve")
    assert not program.ok
    assert program.syntax_error


def test_preamble_removes_only_the_entry_point():
    preamble = prompt_preamble(PROMPT, "solve")
    assert "def helper" in preamble and "def solve" not in preamble


def test_humaneval_prompts_with_helpers_keep_them(humaneval_problems):
    by_id = {p.task_id: p for p in humaneval_problems}
    for task_id, helper in [("HumanEval/38", "encode_cyclic"), ("HumanEval/50", "encode_shift"),
                            ("HumanEval/32", "poly")]:
        problem = by_id[task_id]
        reply = f"```python\n{problem.prompt}{problem.canonical_solution}\n```"
        source = assemble_program(problem.prompt, reply, problem.entry_point).source
        assert f"def {helper}" in source
        # Only the entry point's body from the reply: the prompt's helper must still be there.
        body_only = assemble_program(problem.prompt, problem.canonical_solution, problem.entry_point)
        assert f"def {helper}" in body_only.source and body_only.ok


@pytest.mark.parametrize(("reply", "implements"), [
    ("```python\ndef add(a, b):\n    return a + b\n```", True),
    ("return a + b", True),
    ("def add(a, b):\n    print(a)", True),  # does something, if wrongly
    ("", False),  # the prompt's own stub
    ("def add(a, b):\n    '''Add.'''\n    ...", False),
    ("def add(a, b):\n    pass", False),
    ("def add(a, b):\n    raise NotImplementedError", False),
    ("def add(a, b):\n    '''Add.'''\n    raise NotImplementedError('todo')", False),
    ("def add(a, b):\n    raise ValueError('not yet')", True),  # a deliberate error is behaviour
    ("[3, (1, 2)]", False),  # an example output as the body
    ("def add(a, b) return", False),  # does not parse
    ("def helper():\n    return 1", False),  # the entry point stays a stub
])
def test_implements_tells_a_solution_from_a_stub(reply, implements):
    program = assemble_program('def add(a, b):\n    """Add."""\n', reply, "add")
    assert program.implements("add") is implements
