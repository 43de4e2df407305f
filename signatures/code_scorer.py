"""The value role of tree search: how likely an implementation is to be fully correct."""

from __future__ import annotations

import dspy


class CodeScorer(dspy.Signature):
    """You grade an implementation of a programming problem. Judge how likely it is to be correct
    on all inputs the docstring allows, not only on the shown examples: check the logic against
    every requirement and edge case, and take the results on the visible examples into account."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The implementation to grade.")
    execution_feedback: str = dspy.InputField(desc="Its results on the visible examples.")
    assessment: str = dspy.OutputField(desc="One or two sentences: what is right or wrong.")
    score: int = dspy.OutputField(desc="0 (certainly wrong) to 10 (certainly correct).")
