"""Typed outputs shared by the review roles (critic, meta-critic)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Verdict = Literal["approve", "request_changes", "reject"]
Severity = Literal["critical", "major", "minor", "suggestion"]
Category = Literal["bug", "logic", "style", "performance", "security"]


class Finding(BaseModel):
    """One issue the critic found in the code."""

    severity: Severity = Field(description="critical / major / minor / suggestion")
    category: Category = Field(description="bug / logic / style / performance / security")
    line: int | None = Field(default=None, description="Line number in the code, if it applies.")
    description: str = Field(description="What is wrong.")
    suggestion: str = Field(default="", description="How to fix it.")


class Review(BaseModel):
    """A critic's review of one version of the code."""

    verdict: Verdict
    findings: list[Finding] = Field(default_factory=list)
    summary: str = ""


def render_review(review: Review) -> str:
    """The review as the fixer reads it: plain text, one finding per line."""
    lines = [f"Verdict: {review.verdict}. {review.summary}".strip()]
    for i, finding in enumerate(review.findings, start=1):
        where = f" (line {finding.line})" if finding.line else ""
        fix = f" Fix: {finding.suggestion}" if finding.suggestion else ""
        lines.append(f"{i}. [{finding.severity}/{finding.category}]{where} {finding.description}{fix}")
    return "\n".join(lines)
