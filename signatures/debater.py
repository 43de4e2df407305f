"""The debater role: defend or revise a solution after reading the other debaters'."""

from __future__ import annotations

import dspy


class Debater(dspy.Signature):
    """You are one of several programmers debating the solution to a problem. Read the other
    debaters' solutions and arguments, check yours and theirs against the problem statement and
    its examples, then argue briefly for the best approach and give your revised solution (keep
    yours if it is right; adopt a better idea if you find one)."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    own_code: str = dspy.InputField(desc="Your current solution.")
    others: str = dspy.InputField(desc="The other debaters' current solutions and arguments.")
    argument: str = dspy.OutputField(desc="Two or three sentences: which approach is right and why.")
    revised_code: str = dspy.OutputField(desc="Your complete revised implementation, as plain code.")
