"""A panel critic: the critic's review, narrowed to one focus (correctness, edge cases,
performance …), so several critics can review one version side by side."""

from __future__ import annotations

from typing import Literal

import dspy

from critiquelab.signatures.review import Finding, Verdict

CriticFocus = Literal["correctness", "edge_cases", "performance", "readability", "security"]

# What each panel critic is told to look for: the focus field of its request.
FOCUS_INSTRUCTIONS: dict[str, str] = {
    "correctness": "Does the code compute what the problem asks, on every example in the statement? "
    "Trace the examples by hand; look for wrong logic, wrong return values and off-by-one errors.",
    "edge_cases": "Which inputs the statement allows could break the code: empty inputs, zero, "
    "negative numbers, single elements, duplicates, the largest or smallest values?",
    "performance": "Is the code fast enough for the input sizes the problem implies? Look for "
    "needless quadratic loops, repeated work and unbounded recursion.",
    "readability": "Is the code clear enough to maintain: names, structure, dead code? Request "
    "changes only for problems that could hide a defect.",
    "security": "Does the code do anything unsafe with its inputs: eval or exec, shell commands, "
    "file or network access, unbounded memory?",
}


class FocusedCritic(dspy.Signature):
    """You are one reviewer on a panel of code reviewers, each with their own focus. Review the
    code for the problem from your focus only; the other reviewers cover the rest.

    Approve if you find no defect within your focus. Otherwise request changes (fixable defects)
    or reject (the approach is wrong), and list each defect as a finding with its severity,
    category, line, description and a concrete suggestion. When execution results on the
    visible examples are given, trust them."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The candidate implementation to review.")
    execution_feedback: str = dspy.InputField(
        desc="Results of running the code on the examples visible in the problem, or 'none'."
    )
    focus: str = dspy.InputField(desc="What this reviewer looks for, and only that.")
    verdict: Verdict = dspy.OutputField(desc="approve, request_changes or reject")
    findings: list[Finding] = dspy.OutputField(
        desc="Defects found within your focus (empty when approving): severity, category, line, "
        "description, suggestion."
    )
    summary: str = dspy.OutputField(desc="One line summarising the review.")
