"""Score a reply on a problem's hidden test.

Lives in ``eval`` (not ``experiments``) because both the runner and the optimisers score code:
the optimisers' metrics are "does the hidden test pass", and ``optimizers`` must not import
``experiments``.
"""

from __future__ import annotations

from collections.abc import Sequence

from critiquelab.eval.assembly import AssembledProgram, assemble_program, contains_code
from critiquelab.eval.execution import ExecutionJob, run_many, run_program
from critiquelab.eval.problems import Problem
from critiquelab.eval.verdict import Status, Verdict

NO_CODE = "no_code"


def score_code(problem: Problem, code: str, timeout_s: float) -> tuple[AssembledProgram, Verdict]:
    """Assemble a reply into a program and run the hidden test on it."""
    program = assemble_program(problem.prompt, code, problem.entry_point)
    if not contains_code(code):
        # Otherwise an empty reply runs as the prompt's stub (an "assertion") and prose as a body
        # (a "syntax" error): both hide that the model returned nothing to test.
        detail = "the model returned no code" + (f": {code.strip()[:200]!r}" if code.strip() else "")
        return program, Verdict(status=Status.FAILED, reason=NO_CODE, detail=detail)
    if not program.ok:
        return program, Verdict(status=Status.FAILED, reason="syntax", detail=program.syntax_error or "")
    verdict = run_program(
        program.source, problem.test, problem.entry_point, timeout_s=timeout_s, prompt=problem.prompt
    )
    return program, verdict


def score_programs(
    scored: Sequence[tuple[Problem, str]], timeout_s: float, *, workers: int | None = None
) -> list[Verdict]:
    """Run already assembled programs (a finished run's ``final_code``) on the hidden tests of
    the paired problems, over the sandbox's lanes at once; verdicts in order. The program runs
    as it is, not re-assembled against the problem's prompt: it is what was scored before, and
    the prompt (dataset text) still reaches the trusted side for helpers the tests use."""
    jobs = [ExecutionJob(program, problem.test, problem.entry_point, timeout_s, problem.prompt)
            for problem, program in scored]
    return run_many(jobs, workers=workers) if jobs else []
