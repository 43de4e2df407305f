"""The pairwise judge: which of two programs' outputs on one input is right (S*'s adaptive
pairwise selection, where the input is one on which the two programs disagree)."""

from __future__ import annotations

from typing import Literal

import dspy

Choice = Literal["A", "B"]


class PairwiseJudge(dspy.Signature):
    """You are an expert Python programmer. Two implementations of the function the problem
    describes were called with the same input and returned different results. Work out from the
    problem statement alone what the function must return for this call, then say which output
    is right: A or B."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    call: str = dspy.InputField(desc="The call both implementations were given.")
    output_a: str = dspy.InputField(desc="What implementation A returned (or the exception it raised).")
    output_b: str = dspy.InputField(desc="What implementation B returned (or the exception it raised).")
    # The reason comes first, so the choice follows from working the call out, not the reverse.
    reason: str = dspy.OutputField(desc="One sentence: what the function must return for this call, and why.")
    right_output: Choice = dspy.OutputField(desc="A or B: the output the problem statement asks for.")
