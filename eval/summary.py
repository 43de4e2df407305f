"""Aggregate per-problem results of one pipeline × seed into the metrics MLflow logs.

The rule for metrics that do not apply (here and in :func:`eval.statistics.pipeline_summary`):
a rate or mean whose denominator is empty — no first version that failed and was challenged
(critique success), none that passed (harmful revisions), no consensus reached (final in
majority), no debater outcomes (flips), no agreement or sample data — is *absent*: not logged
to MLflow, missing from compare's table and shown as "–" in its report. It is never 0, which
would claim a measurement that was not made. Counts (``harmful_revisions``, ``critique_rescues``,
flips) are measured whenever their pipeline produces the data, and are then a real 0.
"""

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
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "lm_calls": sum(r.lm_calls for r in results),
        "cached_lm_calls": sum(r.cached_lm_calls for r in results),
        "unparsed_problems": sum(not r.parsed for r in results),
        "problem_latency_s": sum(r.latency_s for r in results),
    }
    if n:  # per-problem means; datasets are never empty, but no problem means no mean
        metrics["pass_at_1"] = passed / n
        metrics["tokens_per_problem"] = (prompt + completion) / n
        metrics["mean_iterations"] = sum(r.iterations for r in results) / n
    metrics.update(prefix_reuse_metrics(results))
    metrics.update(revision_metrics(results))
    metrics.update(panel_metrics(results))
    metrics.update(consensus_metrics(results))
    metrics.update(sample_metrics(results))
    metrics.update(search_metrics(results))
    metrics.update(distinguishing_metrics(results))
    metrics.update(generated_test_metrics(results))
    metrics.update(event_counts(results))
    for role, usage in _usage_by_role(results).items():
        metrics[f"role.{role}.calls"] = usage["calls"]
        metrics[f"role.{role}.tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
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


def revision_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """For pipelines that revise their first answer (results carrying ``extra.first_passed``).

    - critique success rate: of problems whose first code failed and where the critic asked
      for changes, the share whose final code passes;
    - harmful-revision rate: of problems whose first code passed, the share whose final fails.
    """
    scored = [r for r in results if "first_passed" in r.extra]
    if not scored:
        return {}
    first_pass = [r for r in scored if r.extra["first_passed"]]
    challenged = [r for r in scored if not r.extra["first_passed"] and r.extra.get("changes_requested")]
    harmed = [r for r in first_pass if not r.passed]
    rescued = [r for r in challenged if r.passed]
    metrics: dict[str, float] = {
        "first_pass_at_1": len(first_pass) / len(scored),
        "harmful_revisions": len(harmed),
        "critique_rescues": len(rescued),
        "changes_requested_problems": sum(bool(r.extra.get("changes_requested")) for r in scored),
    }
    if first_pass:
        metrics["harmful_revision_rate"] = len(harmed) / len(first_pass)
    if challenged:
        metrics["critique_success_rate"] = len(rescued) / len(challenged)
    messages = [r.extra["messages"] for r in scored if "messages" in r.extra]
    if messages:
        metrics["messages_per_problem"] = sum(messages) / len(messages)
    return metrics


def panel_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """For a critic panel (results carrying ``extra.changes_requested_by``), per critic kind:
    problems on which it asked for changes, and its critique success rate — of the problems
    whose first code failed and on which it asked for changes, the share whose final code
    passes (absent where it challenged no failing first version)."""
    scored = [r for r in results if "changes_requested_by" in r.extra and "first_passed" in r.extra]
    kinds = dict.fromkeys(kind for r in scored for kind in r.extra["changes_requested_by"])
    metrics: dict[str, float] = {}
    for kind in kinds:
        asked = [r for r in scored if kind in r.extra["changes_requested_by"]]
        challenged = [r for r in asked if not r.extra["first_passed"]]
        metrics[f"changes_requested.{kind}"] = len(asked)
        if challenged:
            metrics[f"critique_success_rate.{kind}"] = sum(r.passed for r in challenged) / len(challenged)
    return metrics


def _usage_by_role(results: Sequence[ProblemResult]) -> dict[str, dict[str, float]]:
    totals: dict[str, dict[str, float]] = {}
    for result in results:
        for role, usage in result.usage_by_role.items():
            into = totals.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            for key in into:
                into[key] += usage.get(key, 0)
    return totals


def consensus_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """For debates: how often debaters converge, whether converging means being right, and
    how often debating flips a debater's solution between correct and wrong.

    ``final_in_majority_rate`` is over the debates that reached consensus (a majority to be in),
    as in :func:`eval.statistics.pipeline_summary`.
    """
    debates = [r for r in results if "consensus" in r.extra]
    if not debates:
        return {}
    n = len(debates)
    agreed = [r for r in debates if r.extra["consensus"]]
    metrics: dict[str, float] = {
        "consensus_rate": len(agreed) / n,
        "consensus_correctness": sum(r.passed for r in agreed) / n,
    }
    if agreed:
        in_majority = sum(bool(r.extra.get("final_in_majority")) for r in agreed)
        metrics["final_in_majority_rate"] = in_majority / len(agreed)
    final_agreement = [r.extra["agreement"][-1] for r in debates if r.extra.get("agreement")]
    if final_agreement:
        metrics["mean_final_agreement"] = sum(final_agreement) / len(final_agreement)
    flips = [
        (bool(first), bool(final)) for r in debates
        for first, final in zip(r.extra.get("debaters_first_passed", []),
                                r.extra.get("debaters_final_passed", []), strict=False)
    ]
    if flips:
        metrics["flips_correct_to_wrong"] = sum(first and not final for first, final in flips)
        metrics["flips_wrong_to_correct"] = sum(final and not first for first, final in flips)
    return metrics


def sample_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """For pipelines that draw several samples: unbiased pass@k over the samples, and (vote with
    greedy_first) how often the greedy answer passed the visible examples and no sample was drawn."""
    from eval.metrics import SAMPLE_KS, pass_at_k

    metrics: dict[str, float] = {}
    greedy = [float(r.extra["greedy_answer"]) for r in results if "greedy_answer" in r.extra]
    if greedy:
        metrics["greedy_answer_rate"] = sum(greedy) / len(greedy)
    scored = [r.extra["samples_passed"] for r in results if r.extra.get("samples_passed")]
    if not scored:
        return metrics
    for k in SAMPLE_KS:
        eligible = [s for s in scored if len(s) >= k]
        if eligible:
            total = sum(pass_at_k(len(s), sum(s), k) for s in eligible)
            metrics[f"samples_pass_at_{k}"] = total / len(eligible)
    return metrics


def search_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """For tree search (results carrying ``extra.nodes_passed``, every node scored after the
    search): how often the tree held a node that passes the hidden tests, and how often the
    search then answered with another — selection's share of the failures."""
    scored = [r for r in results if "nodes_passed" in r.extra]
    if not scored:
        return {}
    held = [r for r in scored if any(r.extra["nodes_passed"])]
    return {
        "tree_has_passing_node_rate": len(held) / len(scored),
        "passing_node_not_chosen": sum(not r.passed for r in held),
        "mean_nodes": sum(len(r.extra["nodes_passed"]) for r in scored) / len(scored),
    }


def distinguishing_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """For selection among scored candidates with the greedy answer first (``distinguish``:
    results carrying ``extra.candidates_passed``, candidate 0 the greedy answer, and
    ``extra.greedy_replaced``): how often some candidate passed the hidden tests, the share of
    those problems whose answer passed (``selection_accuracy``, absent when none had one), and
    how often a greedy answer that passed the visible examples was replaced — rightly (the
    replacement passes, the greedy answer did not) or wrongly (the reverse)."""
    scored = [r for r in results if "candidates_passed" in r.extra and "greedy_replaced" in r.extra]
    if not scored:
        return {}
    solvable = [r for r in scored if any(r.extra["candidates_passed"])]
    replaced = [r for r in scored if r.extra["greedy_replaced"]]
    outcomes = [(r.passed, bool(r.extra["candidates_passed"][0])) for r in replaced]  # (answer, greedy)
    metrics: dict[str, float] = {
        "candidates_have_passing_rate": len(solvable) / len(scored),
        "greedy_replaced": len(replaced),
        "greedy_replaced_right": sum(answer and not greedy for answer, greedy in outcomes),
        "greedy_replaced_wrong": sum(greedy and not answer for answer, greedy in outcomes),
        "inputs_kept": sum(r.extra.get("inputs_kept", 0) for r in scored),
        "inputs_dropped": sum(r.extra.get("inputs_dropped", 0) for r in scored),
        "judge_calls": sum(r.extra.get("judge_calls", 0) for r in scored),
    }
    if solvable:
        metrics["selection_accuracy"] = sum(r.passed for r in solvable) / len(solvable)
    return metrics


# Per-problem counts that add up over a run: the SOP line's handoffs, role-play's failure modes.
COUNTED = ("handoff_rejections", "unvalidated_handoffs", "role_flips", "repeated_instructions",
           "no_progress_turns")


def event_counts(results: Sequence[ProblemResult]) -> dict[str, float]:
    """Totals of the :data:`COUNTED` per-problem counts, for pipelines that record them (a real
    0 when recorded and never seen)."""
    return {
        name: sum(r.extra[name] for r in results if name in r.extra)
        for name in COUNTED if any(name in r.extra for r in results)
    }


def generated_test_metrics(results: Sequence[ProblemResult]) -> dict[str, float]:
    """For pipelines whose roles write tests (vote with generated tests, the SOP line's QA):
    how many were written, and the share the dataset's reference solution passes — absent
    when no problem had both a usable test and a reference solution."""
    written = [r for r in results if "generated_tests" in r.extra]
    if not written:
        return {}
    metrics: dict[str, float] = {"generated_tests": sum(r.extra["generated_tests"] for r in written)}
    checked = [r for r in written if "generated_tests_correct" in r.extra]
    total = sum(r.extra["generated_tests"] for r in checked)
    if total:
        metrics["generated_test_accuracy"] = sum(r.extra["generated_tests_correct"] for r in checked) / total
    return metrics
