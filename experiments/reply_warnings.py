"""Warnings about what a run's roles could not use, and ``strict``'s refusal to report a run with
a warning that says its numbers may not measure the method.

Counted per role where every reply is parsed (:func:`critiquelab.runtime.role_call.call_role`, with the
pipelines' fallbacks, :func:`critiquelab.runtime.role_call.fell_back`): an endpoint that answers every role
with a code block (a misconfigured model) leaves every critique unread and every judge undecided,
and a critic loop then measures a baseline. Those runs say so on screen, on the MLflow run and
in ``compare`` (:mod:`critiquelab.experiments.run_warnings`), naming the roles and their counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from critiquelab.core.errors import ServiceError
from critiquelab.eval.results import ProblemResult
from critiquelab.eval.scoring import NO_CODE
from critiquelab.eval.summary import unusable_by_role

# How each count reads in a warning (critiquelab.eval.summary.UNUSABLE_COUNTS, but retries: a warning of its
# own).
_READS = {"unparsed_replies": "unparsed", "codeless_replies": "without code", "fallbacks": "fallbacks taken"}


class RefusedToReport(ServiceError):
    """``strict`` refused to report a run: one line, exit 3; the finished problems stay
    checkpointed, so the run resumes once the endpoint is fixed, or without ``strict``."""


def roles_text(by_role: Mapping[str, Mapping[str, int]]) -> str:
    """``critic 4 unparsed, 4 fallbacks taken; judge 2 unparsed`` (roles in name order)."""
    return "; ".join(
        f"{role} " + ", ".join(f"{counts[key]} {reads}" for key, reads in _READS.items() if counts.get(key))
        for role, counts in sorted(by_role.items())
    )


def _summed(results: Iterable[ProblemResult]) -> dict[str, dict[str, int]]:
    total: dict[str, dict[str, int]] = {}
    for result in results:
        for role, counts in unusable_by_role(result).items():
            into = total.setdefault(role, dict.fromkeys(_READS, 0))
            for key, value in counts.items():
                into[key] += value
    return total


def unusable_reply_warnings(label: str, seed: int, results: list[ProblemResult]) -> list[str]:
    """A role whose reply could not be used (unparsed, no code where code was asked for) leaves the
    pipeline without that role's say: a critique unread ends the loop, an undecided judge's first
    solution stands. The run then measures another method than its name says."""
    hit = [r for r in results if unusable_by_role(r)]
    if not hit:
        return []
    passed = sum(r.passed for r in hit)
    return [
        f"{label} seed {seed}: {len(hit)} of {len(results)} problems had model replies their role "
        f"could not use ({roles_text(_summed(hit))}; {passed} of those problems passed), so the "
        "pipeline went on without those roles' say; an endpoint answering in another form than a "
        "role asks (e.g. code only) makes it another method: check it, then run again with --fresh "
        "(unusable replies are not kept in the LM cache)"
    ]


def retry_warnings(label: str, seed: int, results: list[ProblemResult]) -> list[str]:
    """DSPy asks again (ChatAdapter falls back to JSONAdapter) when it cannot parse a reply: those
    calls cost tokens the method would not spend on an endpoint that answers in form."""
    by_role: dict[str, int] = {}
    problems = 0
    for result in results:
        retried = {role: int(u.get("reply_retries", 0)) for role, u in result.usage_by_role.items()}
        problems += any(retried.values())
        for role, count in retried.items():
            by_role[role] = by_role.get(role, 0) + count
    total = sum(by_role.values())
    if not total:
        return []
    roles = ", ".join(f"{role} {count}" for role, count in sorted(by_role.items()) if count)
    return [
        f"{label} seed {seed}: {total} model calls in {problems} of {len(results)} problems were DSPy "
        f"asking again after a reply it could not parse ({roles}); their tokens are counted with the run's"
    ]


def problem_faults(result: ProblemResult) -> list[str]:
    """What ``strict`` refuses in one problem: replies its roles could not use or fallbacks, no code
    in the answer, replies cut at max_tokens, calls that reported no token usage (the warnings of
    :func:`critiquelab.experiments.run_warnings.refusable_warnings`, for one problem)."""
    faults = []
    by_role = unusable_by_role(result)
    if by_role:
        faults.append(f"replies their role could not use ({roles_text(by_role)})")
    if result.reason == NO_CODE:
        faults.append("no code in the model's answer")
    if result.truncated_replies:
        faults.append(f"{result.truncated_replies} replies stopped at max_tokens")
    if result.lm_calls and not result.prompt_tokens and not result.completion_tokens:
        faults.append("model calls that reported no token usage")
    return faults


def refuse_if_faulty(strict: bool, label: str, seed: int, results: Iterable[ProblemResult], *,
                     checkpointed: bool = False) -> None:
    """With ``strict``, refuse (:class:`RefusedToReport`) at the first of ``results`` with a fault
    (:func:`problem_faults`). A problem just solved is refused before it is checkpointed, so a run
    resumed once the endpoint is fixed solves it again; ``checkpointed`` ones were kept by an
    earlier run without ``strict``."""
    if not strict:
        return
    for result in results:
        faults = problem_faults(result)
        if not faults:
            continue
        where = f"{label} seed {seed}, {result.task_id}"
        if checkpointed:
            remedy = ("it was checkpointed by an earlier run without strict: run with --fresh to ask the "
                      "model again, or without --strict to report the run with its warnings")
        else:
            remedy = ("the run stops unreported, its finished problems kept: fix the endpoint, or leave "
                      "out --strict (spec: strict) to report the run with its warnings")
        raise RefusedToReport(f"strict: {where}: {'; '.join(faults)}; {remedy}")
