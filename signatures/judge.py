"""The judge (referee) role: choose or merge the final solution of a debate."""

from __future__ import annotations

import dspy


class Judge(dspy.Signature):
    """You are the referee of a debate among programmers. Read the problem, the final numbered
    solutions and the debate transcript. Choose the solution most likely to be correct on every
    requirement and example. Only if none is right as is but combining them fixes it, write a
    merged solution."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    proposals: str = dspy.InputField(desc="The debaters' final solutions, numbered from 1.")
    transcript: str = dspy.InputField(desc="The debaters' arguments, round by round.")
    choice: int = dspy.OutputField(desc="The number of the chosen solution.")
    rationale: str = dspy.OutputField(desc="One or two sentences explaining the choice.")
    merged_code: str = dspy.OutputField(
        desc="A merged solution only if no proposal is right as is; otherwise leave empty."
    )
