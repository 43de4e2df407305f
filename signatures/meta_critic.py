"""The meta-critic role: a critique of the critique ("reflection on reflection")."""

from __future__ import annotations

import dspy


class MetaCritic(dspy.Signature):
    """You review a code review. Decide which of its findings are wrong (the code is actually
    fine there) and which real defects it missed, judged against the problem statement and any
    execution results. A fixer will act only on the findings you keep."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The code that was reviewed.")
    review: str = dspy.InputField(desc="The review: verdict and numbered findings.")
    execution_feedback: str = dspy.InputField(desc="Results on the visible examples, or 'none'.")
    wrong_findings: list[int] = dspy.OutputField(desc="Numbers of the findings that are wrong.")
    missing_issues: list[str] = dspy.OutputField(desc="Real defects the review missed.")
    review_is_sound: bool = dspy.OutputField(desc="True if the review's verdict is right.")
