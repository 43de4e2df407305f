"""Warnings a child run carries (on screen and tagged on its MLflow run): what may make its
numbers misleading although nothing failed."""

from __future__ import annotations

from critiquelab.eval.results import ProblemResult
from critiquelab.eval.scoring import NO_CODE
from critiquelab.experiments.reply_warnings import retry_warnings, unusable_reply_warnings
from critiquelab.experiments.spec.experiment import ExperimentSpec


def child_run_warnings(spec: ExperimentSpec, label: str, seed: int,
                       results: list[ProblemResult]) -> list[str]:
    """Every warning the child run ``label``/``seed`` carries, one line each."""
    return (refusable_warnings(label, seed, results) + retry_warnings(label, seed, results)
            + speculation_warnings(spec, label, seed))


def refusable_warnings(label: str, seed: int, results: list[ProblemResult]) -> list[str]:
    """The warnings that say a run's numbers may not measure its method — what the endpoint
    answered, not how the method did — which ``strict`` refuses to report
    (:func:`critiquelab.experiments.reply_warnings.refuse_if_faulty` checks the same per problem). Not
    refusable: retries (they end in a reply that parsed, or in one counted as unparsed) and
    speculative decoding (a serving choice the spec made)."""
    return (no_code_warnings(label, seed, results) + usage_warnings(label, seed, results)
            + truncation_warnings(label, seed, results) + unusable_reply_warnings(label, seed, results))


def no_code_warnings(label: str, seed: int, results: list[ProblemResult]) -> list[str]:
    """Empty or prose-only replies usually mean a broken endpoint, not a weak model: they are
    reported (on screen and on the run) rather than passing as ordinary failures."""
    count = sum(r.reason == NO_CODE for r in results)
    if not count:
        return []
    return [
        f"{label} seed {seed}: {count} of {len(results)} problems got no code from the model (empty "
        "or prose-only replies); if the endpoint was at fault, fix it and run again with --fresh "
        "(replies without code are not kept in the LM cache, so the model is asked again)"
    ]


def usage_warnings(label: str, seed: int, results: list[ProblemResult]) -> list[str]:
    """An endpoint whose replies carry no ``usage`` block counts 0 tokens: the run's token and
    cost columns would read as free, so it is said, not shown as a measurement."""
    silent = [r for r in results if r.lm_calls and not r.prompt_tokens and not r.completion_tokens]
    if not silent:
        return []
    return [
        f"{label} seed {seed}: {len(silent)} of {len(results)} problems made model calls that "
        "reported no token usage (the endpoint's replies carry no usage block), so this run's "
        "tokens and costs read 0 for them and are not a measurement"
    ]


def truncation_warnings(label: str, seed: int, results: list[ProblemResult]) -> list[str]:
    """A reply cut at max_tokens is scored as whatever its text holds (often no code, or code
    missing its end): part of what the run measures is then the limit, not the method."""
    cut = [r for r in results if r.truncated_replies]
    if not cut:
        return []
    passed = sum(r.passed for r in cut)
    return [
        f"{label} seed {seed}: {sum(r.truncated_replies for r in cut)} model replies in {len(cut)} of "
        f"{len(results)} problems stopped at max_tokens, cut off unfinished ({passed} of those problems "
        "passed); with a larger model.max_tokens the run measures the method, not the limit"
    ]


def speculation_warnings(spec: ExperimentSpec, label: str, seed: int) -> list[str]:
    """Speculative decoding can change a greedy reply (a near-tie flipped by the draft check's
    batch, measured in the README): a run served so is not the same measurement as one without."""
    if spec.model.speculative == "off":
        return []
    return [
        f"{label} seed {seed}: served with model.speculative '{spec.model.speculative}': some greedy "
        "replies differ from an unspeculated server's (as with batching; README, Models), so "
        "compare it with runs served the same way or replayed from the same LM cache"
    ]
