"""What a problem's hidden tests say about a version of the code, as text a role can read.

For positive controls only (``critiquelab.pipelines.controls``: the ``oracle_feedback`` arm): everywhere else
hidden tests score code after a pipeline returned and never reach a prompt. The text names the
failing check as the test writes it (HumanEval's ``assert candidate(...) == ...``), the call the
candidate answered last before it, and what that call returned or raised — the analogue of the
visible examples' execution feedback, from the tests that decide the score.
"""

from __future__ import annotations

from critiquelab.eval.assembly import assemble_program, contains_code
from critiquelab.eval.execution import FailureExplanation, run_program_explained
from critiquelab.eval.problems import Problem

ALL_PASS = "PASS: every check of the problem's tests passes."


def hidden_test_feedback(problem: Problem, code: str, *, timeout_s: float) -> str:
    """The hidden tests' verdict on ``code`` (a model's reply, assembled with the prompt as the
    scorer assembles it): one PASS line, or a FAIL line with the reason and, when the failure
    surfaced inside the test, the failing check, the call and what it returned or raised."""
    if not contains_code(code):
        return "FAIL (no_code): the reply holds no code to test."
    program = assemble_program(problem.prompt, code, problem.entry_point)
    if not program.ok:
        return f"FAIL (syntax): the code does not compile: {program.syntax_error}"
    verdict, why = run_program_explained(
        program.source, problem.test, problem.entry_point, timeout_s=timeout_s, prompt=problem.prompt
    )
    if verdict.passed:
        return ALL_PASS
    head = f"FAIL ({verdict.reason})" + (f": {verdict.detail}" if verdict.detail else "")
    return "\n".join([head, *_explained(why, problem.entry_point)])


def _explained(why: FailureExplanation, entry_point: str) -> list[str]:
    lines = []
    if why.test_line:
        lines.append(f"failing check: {why.test_line}  (`candidate` is {entry_point})")
    if why.args or why.returned or why.raised:
        lines.append(f"last call: {entry_point}({why.args})")
    if why.returned:
        lines.append(f"returned: {why.returned}")
    if why.raised:
        lines.append(f"raised: {why.raised}")
    return lines
