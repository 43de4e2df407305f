"""Run untrusted programs against HumanEval-style tests: the harness's one execution entry.

The candidate runs in a sandbox (``eval/sandbox``: bubblewrap namespaces, an unprivileged uid,
rlimits, a fork server); the test's asserts run in a separate trusted process that receives
only plain data from the candidate, so no candidate can forge its verdict (issue #3).

Pass the problem's ``prompt`` when you have it: some tests use helpers the prompt defines
(HumanEval/32 uses ``poly``); the prompt is dataset text, so it is executed on the trusted side.
Never pass model-written text as ``prompt`` or ``test``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from critiquelab.eval.verdict import Status, Verdict

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ExecutionJob:
    """One program × test execution for :func:`run_many`."""

    program: str
    test: str
    entry_point: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    prompt: str | None = None  # trusted dataset prompt (helpers the test may use)


class CallOutcome(BaseModel):
    """What one call of the candidate did, as plain data.

    ``kind``: ``returned`` (``value`` holds the plain-data result), ``raised`` (``error_type``,
    ``error_message``, ``error_line``: the program's line, 0 if unknown), ``timed_out``, or
    ``failed`` (could not run or returned something that is not plain data; ``reason`` as in
    :class:`Verdict`: syntax, missing_entry_point, crash, memory_limit, unsupported_return,
    bad_call …).
    """

    kind: Literal["returned", "raised", "timed_out", "failed"]
    value: Any = None
    error_type: str = ""
    error_message: str = ""
    error_line: int = 0
    reason: str = ""
    detail: str = ""
    duration_s: float = 0.0
    isolation: str = ""

    def signature(self) -> tuple[str, str]:
        """A hashable summary of the behaviour, for grouping samples that agree (CodeT)."""
        if self.kind == "returned":
            return ("returned", repr(self.value))
        if self.kind == "raised":
            return ("raised", self.error_type)
        return (self.kind, self.reason)


def isolation_level() -> str:
    """The isolation level candidates run under on this machine (log it with every run).

    ``bwrap`` (namespaces + unprivileged uid + rlimits), ``setuid`` (unprivileged uid +
    rlimits, no namespaces) or ``process`` (rlimits only); see ``eval/sandbox/isolation.py``.
    """
    from critiquelab.eval.sandbox.isolation import detect_level

    return detect_level()


def _pool(limits: Any = None) -> Any:
    from critiquelab.eval.sandbox.limits import DEFAULT_LIMITS
    from critiquelab.eval.sandbox.pool import get_pool

    return get_pool(isolation_level(), limits or DEFAULT_LIMITS)


def _job_dict(job: ExecutionJob) -> dict[str, Any]:
    return {"kind": "check", "program": job.program, "test": job.test,
            "entry_point": job.entry_point, "timeout_s": job.timeout_s, "prompt": job.prompt}


def _to_verdict(result: dict[str, Any], level: str) -> Verdict:
    return Verdict(status=Status(result["status"]), reason=result.get("reason", ""),
                   detail=result.get("detail", ""), duration_s=result.get("duration_s", 0.0),
                   isolation=level)


def run_program(
    program: str,
    test: str,
    entry_point: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    prompt: str | None = None,
    limits: Any = None,
) -> Verdict:
    """Run ``check(entry_point)`` from ``test`` against ``program`` in the sandbox.

    ``timeout_s`` bounds the whole sample (loading the module and every call). ``limits`` is an
    ``critiquelab.eval.sandbox.limits.Limits`` (memory, file size, disk, processes); defaults suit HumanEval.
    Never raises for anything the candidate does; ``Status.ERROR`` means the sandbox failed.
    """
    job = ExecutionJob(program, test, entry_point, timeout_s, prompt)
    pool = _pool(limits)
    return _to_verdict(pool.run(_job_dict(job)), pool.level)


class FailureExplanation(BaseModel):
    """Where a test run failed, as text from the trusted side: the test's line the failure
    surfaced at, and the candidate's last call before it (its arguments, and what it returned or
    raised; both empty when the call never answered or no call was made)."""

    test_line: str = ""
    args: str = ""
    returned: str = ""
    raised: str = ""


def run_program_explained(
    program: str, test: str, entry_point: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
    prompt: str | None = None,
) -> tuple[Verdict, FailureExplanation]:
    """:func:`run_program`, and on a failure inside the test where it failed and on what. Only
    for a positive control (``critiquelab.pipelines.controls``): the explanation quotes the hidden test."""
    pool = _pool()
    result = pool.run({**_job_dict(ExecutionJob(program, test, entry_point, timeout_s, prompt)),
                       "explain": True})
    explanation = result.get("explanation")
    found = FailureExplanation.model_validate(explanation if isinstance(explanation, dict) else {})
    return _to_verdict(result, pool.level), found


def run_many(
    jobs: Sequence[ExecutionJob], *, workers: int | None = None, limits: Any = None
) -> list[Verdict]:
    """Run many jobs over the worker pool (one lane per core by default); results in order."""
    pool = _pool(limits)
    results = pool.run_many([_job_dict(job) for job in jobs], workers)
    return [_to_verdict(result, pool.level) for result in results]


def call_function(
    program: str,
    entry_point: str,
    calls: Sequence[str],
    *,
    timeout_s: float = 5.0,
    limits: Any = None,
) -> list[CallOutcome]:
    """Call ``entry_point`` once per argument-list source (e.g. ``"[1, 2], 3"``).

    Arguments are evaluated inside the sandbox (they may be model-written). Calls share one
    module instance, like a doctest session; after a timeout or crash the module is reloaded
    for the next call. ``timeout_s`` applies to each call.
    """
    from critiquelab.eval.sandbox.codec import CodecError, decode_tree

    pool = _pool(limits)
    result = pool.run({"kind": "calls", "program": program, "entry_point": entry_point,
                       "calls": list(calls), "timeout_s": timeout_s})
    outcomes = result.get("outcomes") or []
    if len(outcomes) != len(calls):  # the lane itself failed
        fallback = {"kind": "failed", "reason": result.get("reason", "sandbox"),
                    "detail": result.get("detail", "")}
        if result.get("status") == "timed_out":
            fallback["kind"] = "timed_out"
        outcomes = [fallback] * len(calls)
    converted: list[CallOutcome] = []
    for outcome in outcomes:
        fields = {k: outcome[k] for k in CallOutcome.model_fields if k in outcome}
        if outcome["kind"] == "returned":
            try:
                fields["value"] = decode_tree(outcome["value"])
            except CodecError as exc:  # cannot happen: the checker validated it
                fields = {"kind": "failed", "reason": "protocol", "detail": str(exc)}
        converted.append(CallOutcome(**fields, isolation=pool.level))
    return converted


def shutdown() -> None:
    """Stop the worker pool's processes (also done at interpreter exit)."""
    from critiquelab.eval.sandbox.pool import shutdown as stop

    stop()
