"""The reviewer of the architect team: gate the integrated solution with a typed decision."""

from __future__ import annotations

import dspy

from critiquelab.signatures.team_contracts import ReviewFinding, ReviewVerdict


class TeamReviewer(dspy.Signature):
    """You are the reviewer who decides whether the team's integrated solution is done.

    Check the code against every requirement of the problem, the review request's focus areas
    and criteria, and the results of running it on the problem's visible examples (trust them).
    Approve only if it is correct and passes the examples. Otherwise request changes (fixable)
    or reject (wrong approach), with each defect as a finding: severity, category, line,
    description and a concrete suggestion."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The integrated solution.")
    review_request: str = dspy.InputField(desc="Scope, focus areas and criteria of this review.")
    verification: str = dspy.InputField(desc="Results of running the code on the visible examples.")
    verdict: ReviewVerdict = dspy.OutputField(desc="approved, changes_requested or rejected")
    findings: list[ReviewFinding] = dspy.OutputField(desc="Defects found (empty when approving).")
    summary: str = dspy.OutputField(desc="One line summarising the review.")
