"""The fixer role: revise code according to a review."""

from __future__ import annotations

import dspy


class Fixer(dspy.Signature):
    """You are an expert Python programmer fixing code after a review.

    Address every valid finding in the review and keep what already works. Return the complete
    corrected function (its `def` line exactly as given in the problem), with the imports and
    helpers it needs. Do not include tests, examples or prints."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The current implementation.")
    review: str = dspy.InputField(desc="The reviewer's verdict and findings to address.")
    revised_code: str = dspy.OutputField(desc="The complete corrected implementation, as plain code.")
