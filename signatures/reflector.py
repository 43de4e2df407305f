"""The reflector role: after a task, what went wrong, what worked and the lesson to keep."""

from __future__ import annotations

import dspy


class Reflector(dspy.Signature):
    """You look back on an attempt at a programming problem. Say briefly what went wrong (or
    what worked), name the kind of mistake or technique involved, and state one general,
    reusable lesson for similar problems (not specific to this function's names)."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="The final code of the attempt.")
    outcome: str = dspy.InputField(desc="What is known about the attempt's result on visible examples.")
    history: str = dspy.InputField(desc="What the agents did on the task: reviews and revisions, or 'none'.")
    what_went_wrong: str = dspy.OutputField(desc="One or two sentences; 'nothing' if all went well.")
    what_worked: str = dspy.OutputField(desc="One sentence.")
    pattern: str = dspy.OutputField(desc="The kind of mistake or technique, in a few words.")
    lesson: str = dspy.OutputField(desc="One general lesson for next time, as an imperative sentence.")
