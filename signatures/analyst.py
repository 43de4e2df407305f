"""The analyst role: read the problem and write down an approach and the edge cases to handle."""

from __future__ import annotations

import dspy


class Analyst(dspy.Signature):
    """You are a careful software analyst. Read the problem and plan its solution before anyone
    writes code.

    Describe the approach in a few sentences (the algorithm, the data structures) and list the
    edge cases the docstring and its examples imply (empty input, negative numbers, ties, …).
    Do not write the implementation."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    approach: str = dspy.OutputField(desc="How to solve it, in a few sentences.")
    edge_cases: list[str] = dspy.OutputField(desc="Edge cases the implementation must handle, one per item.")
