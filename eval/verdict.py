"""The typed result of running a program against a test."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # the candidate's fault: wrong answer, exception, syntax, limits
    TIMED_OUT = "timed_out"
    ERROR = "error"  # the sandbox itself failed; says nothing about the candidate


class Verdict(BaseModel):
    """Outcome of one program × test execution."""

    status: Status
    reason: str = Field(
        default="",
        description="Short machine-friendly cause: 'assertion', 'exception', 'syntax', "
        "'missing_entry_point', 'no_code' (an empty or prose-only reply), 'memory_limit', "
        "'file_size_limit', 'timeout', 'sandbox' …",
    )
    detail: str = Field(default="", description="Human-readable detail (exception message, …).")
    duration_s: float = Field(default=0.0, description="Wall time of the execution.")
    isolation: str = Field(default="", description="Which isolation level ran the candidate.")

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED
