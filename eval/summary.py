"""Aggregate per-problem results of one pipeline × seed into the metrics MLflow logs.

:func:`summarize` computes what every pipeline has (pass@1, tokens, calls, statuses, prefix
reuse, usage per role) and adds the pipeline's own metrics from its figures, which the caller
passes in: the pipeline's outcome model knows them (``critiquelab.pipelines.outcomes.Outcome.run_metrics``,
looked up in the registry by the runner), so nothing here guesses a pipeline from the keys a
result holds.

The rule for metrics that do not apply (here, in the outcome models' summaries and in
:func:`critiquelab.eval.statistics.pipeline_summary`): a rate or mean whose denominator is empty — no first
version that failed and was challenged (critique success), none that passed (harmful
revisions), no consensus reached (final in majority), no debater outcomes (flips), no agreement
or sample data — is *absent*: not logged to MLflow, missing from compare's table and shown as
"–" in its report. It is never 0, which would claim a measurement that was not made. Counts
(``harmful_revisions``, ``critique_rescues``, flips) are measured whenever their pipeline
produces the data, and are then a real 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from critiquelab.eval.results import ProblemResult

FigureMetrics = Callable[[Sequence[ProblemResult]], Mapping[str, float]]
# What a role could not use, counted per role where its reply is parsed (critiquelab.runtime.role_call):
# replies that did not parse, a code-writing role's replies without code, DSPy asking again after
# a reply it could not parse, and fallbacks the pipeline took instead of the role's answer.
UNUSABLE_COUNTS = ("unparsed_replies", "codeless_replies", "reply_retries", "fallbacks")


def summarize(results: Sequence[ProblemResult], figures: FigureMetrics | None = None) -> dict[str, float]:
    """pass@1 (one sample per problem, so the share passed), token and call totals, statuses,
    and ``figures(results)``: the metrics of the pipeline's own figures."""
    n = len(results)
    passed = sum(r.passed for r in results)
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(r.completion_tokens for r in results)
    metrics: dict[str, float] = {
        "problems": n,
        "problems_passed": passed,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "lm_calls": sum(r.lm_calls for r in results),
        "cached_lm_calls": sum(r.cached_lm_calls for r in results),
        "unparsed_problems": sum(not r.parsed for r in results),
        # Replies cut at max_tokens, and the problems that had one (run_warnings says so too).
        "truncated_replies": sum(r.truncated_replies for r in results),
        "problems_with_truncated_replies": sum(r.truncated_replies > 0 for r in results),
        "problem_latency_s": sum(r.latency_s for r in results),
    }
    metrics.update(unusable_reply_metrics(results))
    if n:  # per-problem means; datasets are never empty, but no problem means no mean
        metrics["pass_at_1"] = passed / n
        metrics["tokens_per_problem"] = (prompt + completion) / n
        metrics["mean_iterations"] = sum(r.iterations for r in results) / n
    metrics.update(prefix_reuse_metrics(results))
    if figures is not None:
        metrics.update(figures(results))
    for role, usage in _usage_by_role(results).items():
        metrics[f"role.{role}.calls"] = usage["calls"]
        metrics[f"role.{role}.tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        for key in UNUSABLE_COUNTS:
            metrics[f"role.{role}.{key}"] = usage[key]
    for status, count in Counter(r.status.value for r in results).items():
        metrics[f"status.{status}"] = count
    for reason, count in Counter(r.reason for r in results if r.reason).items():
        metrics[f"reason.{reason}"] = count
    return metrics


def prefix_reuse_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """How much of the prompt the server did not have to evaluate, because a slot still held its
    prefix: ``prompt_reuse_ratio`` = reused / sent, over the calls whose server reported it
    (llama-server does; llama-cpp-python does not — then nothing is logged)."""
    reported = sum(r.reuse_reported_prompt_tokens for r in results)
    if not reported:
        return {}
    reused = sum(r.reused_prompt_tokens for r in results)
    return {
        "prompt_tokens_reused": reused,
        "prompt_tokens_evaluated": reported - reused,
        "prompt_reuse_ratio": reused / reported,
    }


def unusable_reply_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """The run's totals of :data:`UNUSABLE_COUNTS` (a real 0 when none), and the problems that
    had a reply their role could not use or a fallback (run_warnings says so too)."""
    metrics: dict[str, float] = {key: 0 for key in UNUSABLE_COUNTS}
    for result in results:
        for usage in result.usage_by_role.values():
            for key in UNUSABLE_COUNTS:
                metrics[key] += usage.get(key, 0)
    metrics["problems_with_unusable_replies"] = sum(bool(unusable_by_role(r)) for r in results)
    return metrics


def unusable_by_role(result: ProblemResult) -> dict[str, dict[str, int]]:
    """Per role, the problem's replies its role could not use and fallbacks taken (the
    :data:`UNUSABLE_COUNTS` but retries, which end in a usable reply or in an unparsed one), for
    the roles that had any."""
    found = {}
    for role, usage in result.usage_by_role.items():
        counts = {key: int(usage.get(key, 0)) for key in UNUSABLE_COUNTS if key != "reply_retries"}
        if any(counts.values()):
            found[role] = counts
    return found


def _usage_by_role(results: Sequence[ProblemResult]) -> dict[str, dict[str, float]]:
    totals: dict[str, dict[str, float]] = {}
    for result in results:
        for role, usage in result.usage_by_role.items():
            into = totals.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                            **dict.fromkeys(UNUSABLE_COUNTS, 0)})
            for key in into:
                into[key] += usage.get(key, 0)
    return totals
