"""Solve one problem with one pipeline and score it on the hidden tests — the project's one
solve-and-score: a run's executors, an optimisation's validation and trace runs
(:func:`critiquelab.optimizers.compile.evaluate`) and TextGrad's training runs
(:func:`critiquelab.optimizers.refine.run_and_explain`) all call :func:`solve_and_score`, so an
optimisation's validation pass@1 and a run's pass@1 are the same measurement.

What it decides, once for all of them:

* The pipeline's contract (:mod:`critiquelab.pipelines.outcomes`): ``code`` a ``str`` and ``outcome`` the
  typed :class:`Outcome`. Anything else is a bug of the pipeline: a ``TypeError`` naming it
  (a run stops, resumably), never a silent failure that would count as a wrong answer.
* A reply with no code in it (empty, prose only) fails as ``no_code``; one that does not compile
  as ``syntax`` (:func:`critiquelab.eval.scoring.score_code`, which also assembles the program).
* An exception raised by the pipeline propagates: an LM or pool failure is not a wrong answer.

The pipeline sees only the prompt and entry point; the hidden tests are used only after it
returned: on the final code, and on whatever codes the outcome names for scoring (first version,
samples, debaters' solutions, tree nodes) and the tests a role wrote. Those results are validated
into the outcome's own figures and stored, flat, in ``ProblemResult.extra``.

Why here: this is the consumer side of the pipeline contract (outcomes, controls, role LMs all
live in ``pipelines``), and ``optimizers`` may import ``pipelines`` but not ``experiments``."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Mapping
from typing import Any

import dspy

from critiquelab.core.usage import UsageMeter, metering
from critiquelab.eval.generated_tests import canonical_passes, parse_asserts
from critiquelab.eval.hidden_feedback import hidden_test_feedback
from critiquelab.eval.problems import Problem
from critiquelab.eval.program_identity import same_program
from critiquelab.eval.results import ProblemResult
from critiquelab.eval.scoring import score_code
from critiquelab.eval.verdict import Verdict
from critiquelab.pipelines.controls import ORACLE_FEEDBACK, control_of, using_oracle
from critiquelab.pipelines.figure_groups import RevisionFigures
from critiquelab.pipelines.outcomes import Outcome
from critiquelab.runtime.role_lms import using_role_lms
from critiquelab.signatures.adapter import CodeAdapter


def solve_and_score(
    pipeline: dspy.Module,
    problem: Problem,
    *,
    lm: dspy.BaseLM,
    label: str,
    seed: int,
    timeout_s: float,
    role_lms: Mapping[str, dspy.BaseLM] | None = None,
) -> ProblemResult:
    """The pipeline sees only the prompt and entry point; the hidden test is used after it
    returns, to score the final code — except in a positive control (``oracle_feedback``), the
    one arm given the hidden tests' report on the code it revises (:mod:`critiquelab.pipelines.controls`).
    ``role_lms``: roles that run on an LM of their own."""
    meter = UsageMeter()
    start = time.monotonic()
    oracle: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if control_of(getattr(pipeline, "params", None)) == ORACLE_FEEDBACK:
        oracle = using_oracle(functools.partial(hidden_test_feedback, problem, timeout_s=timeout_s))
    with dspy.context(lm=lm, adapter=CodeAdapter()), metering(meter), using_role_lms(role_lms or {}), oracle:
        prediction = pipeline(
            prompt=problem.prompt, entry_point=problem.entry_point, task_id=problem.task_id
        )
    code, outcome = returned_reply(pipeline, prediction)
    program, verdict = score_code(problem, code, timeout_s)
    total = meter.total()
    outcome = outcome.with_scores(hidden_test_figures(problem, code, outcome, verdict, timeout_s))
    return ProblemResult(
        task_id=problem.task_id,
        pipeline=label,
        seed=seed,
        status=verdict.status,
        reason=verdict.reason,
        detail=verdict.detail,
        iterations=outcome.iterations,
        prompt_tokens=total.prompt_tokens,
        completion_tokens=total.completion_tokens,
        lm_calls=total.calls,
        cached_lm_calls=total.cached_calls,
        reused_prompt_tokens=total.reused_prompt_tokens,
        reuse_reported_prompt_tokens=total.reuse_reported_prompt_tokens,
        truncated_replies=total.truncated_replies,
        latency_s=time.monotonic() - start,
        final_code=program.source,
        parsed=outcome.parsed,
        thread_id=outcome.thread_id,
        # Per verdict: a run spread over machines must not mix sandbox levels.
        isolation=verdict.isolation,
        usage_by_role=usage_by_role(meter),
        extra=outcome.figures(),
    )


def usage_by_role(meter: UsageMeter) -> dict[str, dict[str, float]]:
    """What each role's LM calls used, as ``ProblemResult.usage_by_role`` stores it."""
    return {
        role: {
            "calls": u.calls, "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens, "latency_s": round(u.latency_s, 3),
            "model_s": round(u.model_s, 3), "timed_tokens": u.timed_tokens,
            # what the role could not use (critiquelab.runtime.role_call): metrics and warnings per role
            "unparsed_replies": u.unparsed_replies, "codeless_replies": u.codeless_replies,
            "reply_retries": u.reply_retries, "fallbacks": u.fallbacks,
        }
        for role, u in meter.by_role.items()
    }


def returned_code(prediction: object, source: str) -> str:
    """The code ``prediction`` carries, or a ``TypeError`` naming ``source`` (the pipeline) when it
    carries none: a pipeline returns its code as a ``str``, empty when it has none."""
    code = getattr(prediction, "code", None)
    if not isinstance(code, str):
        raise TypeError(f"{source} returned no code (a str, empty when there is none): got {code!r}")
    return code


def returned_reply(pipeline: object, prediction: object) -> tuple[str, Outcome]:
    """The code and typed outcome ``pipeline`` returned, checked against the contract of
    :mod:`critiquelab.pipelines.outcomes`."""
    source = type(pipeline).__name__
    code = returned_code(prediction, source)
    outcome = getattr(prediction, "outcome", None)
    if not isinstance(outcome, Outcome):
        raise TypeError(f"{source} returned no typed outcome "
                        f"(critiquelab.pipelines.outcomes.Outcome): got {outcome!r}")
    return code, outcome


def verdict_of(result: ProblemResult) -> Verdict:
    """The hidden-test verdict of the final code that ``result`` records."""
    return Verdict(status=result.status, reason=result.reason, detail=result.detail,
                   isolation=result.isolation)


def hidden_test_figures(
    problem: Problem, code: str, outcome: Outcome, verdict: Verdict, timeout_s: float
) -> dict[str, Any]:
    """The figures only the hidden tests (or the reference solution) can give, measured after
    the pipeline returned: ``verdict`` is the final ``code``'s."""
    found: dict[str, Any] = {}
    if outcome.first_code is not None:
        # Multi-step pipelines also score their first version: first-pass vs final pass@1,
        # critique success and harmful revisions all need it.
        if outcome.first_code == code:
            found["first_passed"] = verdict.passed
        else:
            found["first_passed"] = score_code(problem, outcome.first_code, timeout_s)[1].passed
        if isinstance(outcome, RevisionFigures):  # failure attribution tells an echo from a repair miss
            found["final_unchanged"] = same_program(outcome.first_code, code)
    for figure, codes in outcome.codes_to_score.items():
        # Per-candidate hidden-test results (debaters' solutions, vote samples, tree nodes): for
        # flips, consensus correctness and pass@k.
        found[figure] = [score_code(problem, candidate, timeout_s)[1].passed for candidate in codes]
    if outcome.generated_test_code is not None:
        found.update(generated_test_accuracy(problem, outcome.generated_test_code, timeout_s))
    return found


def generated_test_accuracy(problem: Problem, generated: str, timeout_s: float) -> dict[str, int]:
    """How many of the tests a role wrote (assert lines) the dataset's reference solution
    passes. Computed here, after the pipeline returned: the reference never reaches a model.
    Without a reference only the count is known (the accuracy is then absent, not 0)."""
    tests = parse_asserts(generated, problem.entry_point)
    found = {"generated_tests": len(tests)}
    passes = canonical_passes(problem, tests, timeout_s=min(timeout_s, 5.0)) if tests else None
    if passes is not None:
        found["generated_tests_correct"] = sum(passes)
    return found
