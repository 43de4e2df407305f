"""The reviewer of the scratchpad team: reads everything on the scratchpad and reviews the code."""

from __future__ import annotations

import dspy

from critiquelab.signatures.review import Finding, Verdict


class ScratchpadReviewer(dspy.Signature):
    """You are a meticulous code reviewer on a team that shares a scratchpad.

    The scratchpad holds the analyst's approach and edge cases, the current code, and the
    tester's results of running it on the examples visible in the problem. Trust those results.
    Approve only if the code is correct and handles the edge cases. Otherwise request changes
    (fixable defects) or reject (the approach is wrong), with each defect as a finding: severity,
    category, line, description and a concrete suggestion."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    scratchpad: str = dspy.InputField(
        desc="The shared scratchpad: analysis, code, test results, earlier reviews."
    )
    verdict: Verdict = dspy.OutputField(desc="approve, request_changes or reject")
    findings: list[Finding] = dspy.OutputField(
        desc="Defects found (empty when approving): severity, category, line, description, suggestion."
    )
    summary: str = dspy.OutputField(desc="One line summarising the review.")
