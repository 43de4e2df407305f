"""Aggregate per-problem results of one pipeline × seed into the metrics MLflow logs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from eval.results import ProblemResult


def summarize(results: Sequence[ProblemResult]) -> dict[str, float]:
    """pass@1 (one sample per problem, so the share passed), token and call totals, statuses."""
    n = len(results)
    passed = sum(r.passed for r in results)
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(r.completion_tokens for r in results)
    metrics: dict[str, float] = {
        "problems": n,
        "problems_passed": passed,
        "pass_at_1": passed / n if n else 0.0,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "tokens_per_problem": (prompt + completion) / n if n else 0.0,
        "lm_calls": sum(r.lm_calls for r in results),
        "cached_lm_calls": sum(r.cached_lm_calls for r in results),
        "mean_iterations": sum(r.iterations for r in results) / n if n else 0.0,
        "unparsed_problems": sum(not r.parsed for r in results),
        "problem_latency_s": sum(r.latency_s for r in results),
    }
    for status, count in Counter(r.status.value for r in results).items():
        metrics[f"status.{status}"] = count
    for reason, count in Counter(r.reason for r in results if r.reason).items():
        metrics[f"reason.{reason}"] = count
    return metrics
