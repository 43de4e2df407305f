"""The developer role: write one function of a larger solution, under the architect's contract."""

from __future__ import annotations

import dspy


class Developer(dspy.Signature):
    """You are a developer on a team. Write exactly the function your task asks for.

    Define only the function named in the task (plus private helpers whose names start with
    '_'); the functions listed in the context already exist and you may call them. If the
    context holds a reviewer's feedback, fix what it points out. Use only the standard library.
    Do not include tests, examples or prints."""

    prompt: str = dspy.InputField(desc="The whole problem, for reference.")
    assignment: str = dspy.InputField(desc="Your task: function name, description, constraints.")
    context: str = dspy.InputField(desc="Code you may call, and review feedback; 'none' if empty.")
    module_code: str = dspy.OutputField(desc="The Python code of your function, as plain code.")
