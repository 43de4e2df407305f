"""The examples a problem shows in its prompt, and what a candidate does on them.

Only these *visible* examples may feed back into prompts (execution feedback to a critic,
CodeT-style agreement among samples). Hidden tests are for scoring only.
"""

from __future__ import annotations

import ast
import doctest
import re
from dataclasses import dataclass
from typing import Any

from critiquelab.eval import python_ast
from critiquelab.eval.assembly import assemble_program
from critiquelab.eval.execution import CallOutcome, call_function

# What may stand between a call and its value in prose examples: "f(x) ==> y", "f(x) # => y",
# "f(x) ➞ y", "f(x) = y", "f(x) returns y" …
_SEPARATOR = re.compile(r"\s*(?:#\s*)?(?:==>|=>|->|➞|==|=|returns|should return)\s*(?P<want>.+?)\s*$")


NO_EXAMPLES = "none (the problem shows no runnable examples)"


@dataclass(frozen=True)
class VisibleExample:
    """``call`` as written in the prompt, its argument source, and the expected value's source."""

    call: str
    args: str
    expected: str


def _args_source(call: str, entry_point: str) -> str | None:
    try:
        node = python_ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point):
        return None
    parts = [ast.unparse(arg) for arg in node.args]
    parts += [f"{kw.arg}={ast.unparse(kw.value)}" for kw in node.keywords if kw.arg]
    return ", ".join(parts)


def _clean_want(want: str) -> str:
    """Doctest's expected output runs to the next blank line, so the docstring's closing quotes
    (and any prose after the value) can end up in it; keep the lines before them."""
    kept = []
    for line in want.splitlines():
        if line.strip().startswith(('"""', "'''")) or not line.strip():
            break
        kept.append(line.strip())
    return " ".join(kept)


def _literal(source: str) -> bool:
    try:
        python_ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _calls_in(line: str, name: str) -> list[tuple[str, str]]:
    """``(call, rest of line)`` for each ``name(...)`` in a line, matching parentheses outside
    string literals."""
    found = []
    for start in (m.start() for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\(", line)):
        depth, quote, i = 0, "", start + len(name)
        while i < len(line):
            char = line[i]
            if quote:
                if char == "\\":
                    i += 1
                elif char == quote:
                    quote = ""
            elif char in "\"'":
                quote = char
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
                if depth == 0:
                    found.append((line[start : i + 1], line[i + 1 :]))
                    break
            i += 1
    return found


def _assert_example(line: str, entry_point: str) -> VisibleExample | None:
    """``assert f(x) == y`` (or ``y == f(x)``) with a literal ``y``, as MBPP prompts show their
    example test. Parsed, not pattern-matched, so ``assert f(x) == y, "message"`` expects ``y``
    and asserts that wrap the call (``set(f(x)) == …``, ``math.isclose(f(x), …)``) give none."""
    source = line.strip()
    try:
        node = python_ast.parse(source).body[0]
    except (SyntaxError, ValueError, IndexError):
        return None
    if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
        return None
    compare = node.test
    if len(compare.ops) != 1 or not isinstance(compare.ops[0], ast.Eq):
        return None
    for call, want in ((compare.left, compare.comparators[0]), (compare.comparators[0], compare.left)):
        call_source, want_source = ast.get_source_segment(source, call), ast.get_source_segment(source, want)
        if call_source is None or not want_source:
            continue
        args = _args_source(call_source, entry_point)
        if args is not None and _literal(want_source):
            return VisibleExample(call_source, args, want_source)
    return None


def visible_examples(prompt: str, entry_point: str) -> list[VisibleExample]:
    """Doctest examples (``>>> f(x)`` then the value), assert lines (``assert f(x) == y``) and
    prose examples (``f(x) ==> y``, ``f(x) ➞ y``, ``>>> f(x) == y`` …) whose expected value is a
    Python literal."""
    found: list[VisibleExample] = []
    try:
        doctests = doctest.DocTestParser().get_examples(prompt)
    except ValueError:
        doctests = []
    for example in doctests:
        args = _args_source(example.source, entry_point)
        want = _clean_want(example.want)
        if args is not None and want and _literal(want):
            found.append(VisibleExample(example.source.strip(), args, want))
    for line in prompt.splitlines():
        if line.strip().startswith("assert "):
            asserted = _assert_example(line, entry_point)
            found.extend([asserted] if asserted else [])
            continue
        for call, rest in _calls_in(line, entry_point):
            match = _SEPARATOR.match(rest)
            args = _args_source(call, entry_point)
            if not match or args is None:
                continue
            want = match["want"].rstrip(".,;")
            if _literal(want):
                found.append(VisibleExample(call, args, want))
    unique = {(e.args, e.expected): e for e in found}
    return list(unique.values())


def _same(actual: Any, expected: Any) -> bool:
    """Whether a value a candidate returned equals a literal the prompt shows (any values)."""
    if isinstance(actual, float) or isinstance(expected, float):
        try:
            a, e = float(actual), float(expected)
        except (TypeError, ValueError):
            return False
        return abs(a - e) <= 1e-6 * max(1.0, abs(e))
    same: bool = actual == expected
    return same


@dataclass(frozen=True)
class ExampleRun:
    """What a candidate did on one visible example."""

    example: VisibleExample
    outcome: CallOutcome
    passed: bool


def run_examples(
    program: str, entry_point: str, examples: list[VisibleExample], *, timeout_s: float = 5.0
) -> list[ExampleRun]:
    """Run the candidate (an assembled program) on each visible example in the sandbox."""
    if not examples:
        return []
    outcomes = call_function(program, entry_point, [e.args for e in examples], timeout_s=timeout_s)
    return [
        ExampleRun(example, outcome, outcome.kind == "returned"
                   and _same(outcome.value, python_ast.literal_eval(example.expected)))
        for example, outcome in zip(examples, outcomes, strict=True)
    ]


def _failure(outcome: CallOutcome) -> str:
    if outcome.kind == "raised":
        return f"raised {outcome.error_type}: {outcome.error_message}"[:300]
    if outcome.kind == "timed_out":
        return "timed out"
    return f"could not run ({outcome.reason})"


def example_passes(
    program: str, entry_point: str, examples: list[VisibleExample], *, timeout_s: float = 5.0
) -> list[bool]:
    """Pass/fail per example (arguments are evaluated in the sandbox, so the examples may be
    model-written; values are compared on the trusted side)."""
    return [run.passed for run in run_examples(program, entry_point, examples, timeout_s=timeout_s)]


def execution_feedback(
    program: str, entry_point: str, examples: list[VisibleExample], *, timeout_s: float = 5.0
) -> str:
    """Run the candidate on the visible examples; one line per example, for a critic to read."""
    if not examples:
        return NO_EXAMPLES
    return _report(run_examples(program, entry_point, examples, timeout_s=timeout_s))


def _report(runs: list[ExampleRun]) -> str:
    lines = []
    for run in runs:
        example, outcome = run.example, run.outcome
        if outcome.kind == "returned":
            mark = "PASS" if run.passed else "FAIL"
            lines.append(f"{mark}: {example.call} returned {outcome.value!r}, expected {example.expected}")
        else:
            lines.append(f"FAIL: {example.call} {_failure(outcome)}, expected {example.expected}")
    return "\n".join(lines)


@dataclass(frozen=True)
class CodeFeedback:
    """A reply's code on the visible examples: what a role is shown, and the counts behind it."""

    report: str  # one PASS/FAIL line per example, or the one line saying the code does not compile
    compiles: bool
    passed: int
    examples: int

    @property
    def all_passed(self) -> bool:
        """It compiles and passes every example (vacuously, where the prompt shows none)."""
        return self.compiles and self.passed == self.examples


def code_feedback(
    prompt: str, code: str, entry_point: str, examples: list[VisibleExample], *, timeout_s: float = 5.0
) -> CodeFeedback:
    """Assemble ``code`` (a model's reply) with the prompt and run it on ``examples``: the
    execution feedback the critic, reviewer, instructor and executor roles read."""
    program = assemble_program(prompt, code, entry_point)
    if not program.ok:
        return CodeFeedback(f"the code does not compile: {program.syntax_error}", False, 0, len(examples))
    if not examples:
        return CodeFeedback(NO_EXAMPLES, True, 0, 0)
    runs = run_examples(program.source, entry_point, examples, timeout_s=timeout_s)
    return CodeFeedback(_report(runs), True, sum(run.passed for run in runs), len(runs))


def debugging_feedback(program: str, runs: list[ExampleRun]) -> str:
    """Self-Debugging style feedback on the failing visible examples of ``runs``: the call, the
    expected value, what the code returned or raised, and the source line an exception came from
    (a line of ``program``, the assembled candidate the examples ran on)."""
    if not runs:
        return NO_EXAMPLES
    failing = [run for run in runs if not run.passed]
    if not failing:
        return f"all {len(runs)} visible examples pass"
    source = program.splitlines()
    blocks = [f"{len(runs) - len(failing)} of {len(runs)} visible examples pass."]
    for run in failing:
        outcome = run.outcome
        got = repr(outcome.value) if outcome.kind == "returned" else _failure(outcome)
        block = f"Example: {run.example.call}\n  expected: {run.example.expected}\n  got: {got}"
        if outcome.kind == "raised" and 0 < outcome.error_line <= len(source):
            block += f"\n  raised at: {source[outcome.error_line - 1].strip()}"
        blocks.append(block)
    return "\n".join(blocks)
