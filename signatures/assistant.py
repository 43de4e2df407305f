"""The assistant of CAMEL role-play: carries out the instructor's instruction in code."""

from __future__ import annotations

import dspy


class Assistant(dspy.Signature):
    """You are the assistant in a pair of programmers: you write the code, the instructor
    gives the instructions. Carry out the instruction by returning the complete updated
    function (its `def` line exactly as given in the problem) with the imports and helpers it
    needs. Do not give instructions back; do not include tests, examples or prints."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    specified_task: str = dspy.InputField(desc="The task as the task specifier stated it.")
    instruction: str = dspy.InputField(desc="The instructor's instruction to carry out now.")
    current_code: str = dspy.InputField(desc="Your code so far, or 'none'.")
    solution_code: str = dspy.OutputField(desc="The complete updated function, as plain code.")
