"""The reflector role: after a task, what went wrong and the lesson to keep."""

from __future__ import annotations

import dspy


class Reflector(dspy.Signature):
    """You look back on an attempt at a programming problem. Say briefly what went wrong (or
    what worked) and state one general, reusable lesson for similar problems."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The final code of the attempt.")
    outcome: str = dspy.InputField(desc="What is known about the attempt's result on visible examples.")
    what_went_wrong: str = dspy.OutputField(desc="One or two sentences.")
    lesson: str = dspy.OutputField(desc="One general lesson, as an imperative sentence.")
