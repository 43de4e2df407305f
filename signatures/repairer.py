"""The repairer role: fix code from what it actually did on the problem's visible examples."""

from __future__ import annotations

import dspy


class Repairer(dspy.Signature):
    """You are an expert Python programmer debugging your own code. The code was run on the
    examples shown in the problem; the feedback says, for each failing example, what was expected,
    what the code returned or raised, and the line an exception came from.

    Find the cause of every failure and fix it; keep what already works. Take the lessons from
    earlier attempts into account. Return the complete corrected function (its `def` line exactly
    as given in the problem), with the imports and helpers it needs. Do not include tests, examples
    or prints."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The current implementation.")
    execution_feedback: str = dspy.InputField(
        desc="The failing visible examples: the call, expected value, what the code returned or "
        "raised, and where."
    )
    reflections: str = dspy.InputField(desc="Lessons from earlier failed attempts, or 'none'.")
    repaired_code: str = dspy.OutputField(desc="The complete corrected implementation, as plain code.")
