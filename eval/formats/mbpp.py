"""The MBPP format: ``task_id`` (often an int), ``text`` (the task in one sentence), ``code``
(the reference solution), ``test_list`` (assert lines), and optionally ``test_setup_code``,
``challenge_test_list``, ``test_imports`` (sanitized MBPP's import lines, which its tests
need; map sanitized MBPP's ``prompt`` column with ``fields: {text: prompt}``) and
``test_program`` (MBPP+'s ``test`` column: a program that calls the function by name on every
base and plus input, run as the hidden test in place of the assert lines).

MBPP's text names no function and gives no signature: the function is the one the tests call,
so the loader finds it in the reference code and writes a HumanEval-shaped prompt — the
reference's ``def`` line and a docstring holding the task text and, as MBPP's own prompts do,
the first test as the example. The hidden test is ``check(candidate)`` running every assert
line (after the setup code) with the function's name bound to the candidate. The example
line is the only test the model sees, so it is the only one execution feedback and vote use.
A ``test_program`` is run by ``check(candidate)`` as a module of its own (its text kept exactly,
never re-indented) over the test module's names, the function's name bound to the candidate.
"""

from __future__ import annotations

import ast
import textwrap

from critiquelab.eval.formats.base import DatasetFormat, FormatOptions
from critiquelab.eval.formats.rows import CANNOT_FAIL, RowReader, can_fail_an_answer, defined_functions
from critiquelab.eval.problems import Problem

_INDENT = "    "


def _called_names(tree: ast.Module) -> list[str]:
    """Names called as plain functions, in source order, without repeats."""
    calls = sorted(
        (n.lineno, n.col_offset, n.func.id)
        for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    )
    return list(dict.fromkeys(name for _line, _column, name in calls))


def infer_entry_point(row: RowReader, code: ast.Module, tests: list[ast.Module]) -> str:
    """The reference function the tests call: of the functions ``code`` defines, the one most
    test lines call (ties: the first called)."""
    defined = defined_functions(code)
    called = [[name for name in _called_names(test) if name in defined] for test in tests]
    order = list(dict.fromkeys(name for names in called for name in names))
    if not order:
        names = sorted({name for test in tests for name in _called_names(test)})
        raise row.error(
            "test_list", f"calls no function that field '{row.column('code')}' defines "
            f"(tests call {names or 'nothing'}; code defines {sorted(defined) or 'nothing'})",
        )
    return max(order, key=lambda name: sum(name in names for names in called))


def signature_line(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The reference's ``def`` line: name, parameters (with defaults and annotations), return
    annotation."""
    prefix = "async def" if isinstance(function, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(function.returns)}" if function.returns else ""
    return f"{prefix} {function.name}({ast.unparse(function.args)}){returns}:"


def _docstring(text: str) -> str:
    """``text`` as a triple-quoted literal that shows it verbatim: raw when it holds
    backslashes (regex tasks, ``"\\n"`` in the example), with the quote style it does not use."""
    raw = "r" if "\\" in text else ""
    for quote in ('"""', "'''"):
        if quote not in text:
            return f"{raw}{quote}{text}\n{_INDENT}{quote}"
    escaped = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{escaped}\n{_INDENT}"""'


def build_prompt(signature: str, text: str, example: str) -> str:
    body = f"{text.strip()}\n\nExample:\n{example.strip()}"
    lines = body.splitlines()
    indented = "\n".join([lines[0], *(f"{_INDENT}{line}" if line.strip() else "" for line in lines[1:])])
    return f"{signature}\n{_INDENT}{_docstring(indented)}\n"


def build_test(entry_point: str, tests: list[str], setup: str, program: str | None = None) -> str:
    """``check(candidate)``: the setup at module level, then ``program`` (if any) and each assert
    line, with ``entry_point`` bound to the candidate."""
    body = "\n".join(textwrap.indent(test.strip(), _INDENT) for test in tests)
    # The local name makes every assert call the candidate, whatever the test module holds.
    head = f"{setup.strip()}\n\n\n" if setup.strip() else ""
    if program is None:
        return f"{head}def check(candidate):\n{_INDENT}{entry_point} = candidate\n{body}\n"
    # exec, not indented into check(): a program's multi-line strings must stay as written.
    run = (f"{_INDENT}namespace = dict(globals())\n{_INDENT}namespace[{entry_point!r}] = candidate\n"
           f"{_INDENT}exec(compile(_TEST_PROGRAM, '<test_program>', 'exec'), namespace)\n")
    return (f"{head}_TEST_PROGRAM = {program!r}\n\n\n"
            f"def check(candidate):\n{_INDENT}{entry_point} = candidate\n{run}{body}\n")


def problem_from_row(row: RowReader, options: FormatOptions) -> Problem:
    task_id = row.task_id()
    text = row.text("text")
    code = row.text("code")
    tests = row.text_list("test_list")
    imports = row.text_list("test_imports", required=False)
    setup = "\n".join([*imports, row.optional_text("test_setup_code") or ""])
    challenge = row.text_list("challenge_test_list", required=False)
    program = row.optional_text("test_program")
    if program is not None and not program.strip():
        raise row.error("test_program", "is empty")
    code_tree = row.parsed("code", code)
    setup_tree = row.parsed("test_setup_code", setup)
    test_trees = [row.parsed("test_list", t, f"item {i} is not valid Python")
                  for i, t in enumerate(tests, start=1)]
    program_tree = row.parsed("test_program", program) if program is not None else None
    challenge_trees = [row.parsed("challenge_test_list", t, f"item {i} is not valid Python")
                       for i, t in enumerate(challenge if options.challenge_tests else [], start=1)]
    entry_point = infer_entry_point(row, code_tree, test_trees)
    try:
        signature = signature_line(defined_functions(code_tree)[entry_point])
    except RecursionError as exc:  # a default or annotation nested past what unparse can write
        raise row.error("code", f"the signature of {entry_point}() is nested too deeply") from exc
    prompt = build_prompt(signature, text, tests[0])
    row.parsed("text", prompt, "cannot be written into a Python docstring")
    asserts = [] if program is not None else tests
    test = build_test(entry_point, [*asserts, *(challenge if options.challenge_tests else [])], setup,
                      program)
    row.parsed("test_list", test, "does not combine into a valid check(candidate)")
    # What check(candidate) runs: the setup, the program or the assert lines, the challenge tests.
    run = [setup_tree, *([program_tree] if program_tree is not None else test_trees), *challenge_trees]
    if not any(can_fail_an_answer(tree) for tree in run):
        raise row.error("test_program" if program_tree is not None else "test_list",
                        f"{CANNOT_FAIL}: every answer would pass")
    return Problem(task_id=task_id, prompt=prompt, entry_point=entry_point, test=test,
                   canonical_solution=code)


FORMAT = DatasetFormat(
    name="mbpp",
    required=("task_id", "text", "code", "test_list"),
    optional=("test_setup_code", "challenge_test_list", "test_imports", "test_program"),
    build=problem_from_row,
)
