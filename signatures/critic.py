"""The critic role: review code for a problem, with a typed verdict and findings."""

from __future__ import annotations

import dspy

from critiquelab.signatures.review import Finding, Verdict


class Critic(dspy.Signature):
    """You are a meticulous code reviewer. Check whether the code correctly solves the problem.

    Compare the code against every requirement and example in the problem statement. Trace the
    examples by hand; when execution results on the visible examples are given, trust them.
    Approve only if the code is correct. Otherwise request changes (fixable defects) or reject
    (the approach is wrong), and list each defect as a finding with its severity, category,
    line, description and a concrete suggestion."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The candidate implementation to review.")
    execution_feedback: str = dspy.InputField(
        desc="Results of running the code on the examples visible in the problem, or 'none'."
    )
    verdict: Verdict = dspy.OutputField(desc="approve, request_changes or reject")
    findings: list[Finding] = dspy.OutputField(
        desc="Defects found (empty when approving): severity, category, line, description, suggestion."
    )
    summary: str = dspy.OutputField(desc="One line summarising the review.")
