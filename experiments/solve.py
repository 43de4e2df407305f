"""Solve one problem with one pipeline and score it on the hidden tests."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import dspy

from core.usage import UsageMeter, metering
from eval.generated_tests import canonical_passes, parse_asserts
from eval.problems import Problem
from eval.results import ProblemResult
from eval.scoring import score_code
from pipelines.role_lms import using_role_lms
from signatures.adapter import CodeAdapter


def solve_and_score(
    pipeline: dspy.Module,
    problem: Problem,
    *,
    lm: dspy.BaseLM,
    label: str,
    seed: int,
    timeout_s: float,
    role_lms: Mapping[str, Any] | None = None,
) -> ProblemResult:
    """The pipeline sees only the prompt and entry point; the hidden test is used after it
    returns, to score the final code. ``role_lms``: roles that run on an LM of their own."""
    meter = UsageMeter()
    start = time.monotonic()
    with dspy.context(lm=lm, adapter=CodeAdapter()), metering(meter), using_role_lms(role_lms or {}):
        prediction = pipeline(
            prompt=problem.prompt, entry_point=problem.entry_point, task_id=problem.task_id
        )
    program, verdict = score_code(problem, prediction.code, timeout_s)
    total = meter.total()
    extra = dict(prediction.get("metrics", {}) or {})
    if verdict.isolation:  # per verdict: a run spread over machines must not mix sandbox levels
        extra["isolation"] = verdict.isolation
    first_code = prediction.get("first_code")
    if first_code is not None:
        # Multi-step pipelines also score their first version: first-pass vs final pass@1,
        # critique success and harmful revisions all need it.
        if first_code == prediction.code:
            extra["first_passed"] = verdict.passed
        else:
            extra["first_passed"] = score_code(problem, first_code, timeout_s)[1].passed
    for name, codes in (prediction.get("scored_codes") or {}).items():
        # Per-candidate hidden-test results (debaters' solutions, vote samples): for flips,
        # consensus correctness and pass@k. Scored here, after the pipeline has returned.
        extra[f"{name}_passed"] = [score_code(problem, code, timeout_s)[1].passed for code in codes]
    generated = prediction.get("generated_tests")
    if generated is not None:
        extra.update(generated_test_accuracy(problem, generated, timeout_s))
    return ProblemResult(
        task_id=problem.task_id,
        pipeline=label,
        seed=seed,
        status=verdict.status,
        reason=verdict.reason,
        detail=verdict.detail,
        iterations=int(prediction.get("iterations", 1) or 1),
        prompt_tokens=total.prompt_tokens,
        completion_tokens=total.completion_tokens,
        lm_calls=total.calls,
        cached_lm_calls=total.cached_calls,
        reused_prompt_tokens=total.reused_prompt_tokens,
        reuse_reported_prompt_tokens=total.reuse_reported_prompt_tokens,
        latency_s=time.monotonic() - start,
        final_code=program.source,
        parsed=bool(prediction.get("parsed", True)),
        thread_id=str(prediction.get("thread_id", "") or ""),
        usage_by_role={
            role: {
                "calls": u.calls, "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens, "latency_s": round(u.latency_s, 3),
            }
            for role, u in meter.by_role.items()
        },
        extra=extra,
    )


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
