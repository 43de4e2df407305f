"""The coder role: a problem statement in, a complete implementation out."""

from __future__ import annotations

import dspy


class Coder(dspy.Signature):
    """You are an expert Python programmer. Implement the function described by the prompt.

    Write the complete function: its `def` line exactly as given, then a correct body. Keep
    the imports and helper functions the prompt relies on. Use only the standard library.
    Handle the edge cases the docstring implies. Do not include tests, examples or prints."""

    prompt: str = dspy.InputField(
        desc="A Python function signature with a docstring describing the task and examples."
    )
    code: str = dspy.OutputField(
        desc="The complete Python implementation of the function, as plain code."
    )
