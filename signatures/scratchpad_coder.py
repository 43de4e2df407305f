"""The coder of the scratchpad team: writes the function from the problem and what the other
agents have put on the shared scratchpad so far."""

from __future__ import annotations

import dspy


class ScratchpadCoder(dspy.Signature):
    """You are an expert Python programmer working with a team on a shared scratchpad.

    Implement the function described by the prompt. The scratchpad shows the team's work so
    far: the analyst's approach and edge cases, your previous code, its results on the examples
    in the problem, and the reviewer's findings. Use what helps and fix every valid finding.
    Write the complete function: its `def` line exactly as given, the imports and helpers it
    needs, standard library only. Do not include tests, examples or prints."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    scratchpad: str = dspy.InputField(desc="The shared scratchpad as you may read it ('empty' at first).")
    code: str = dspy.OutputField(desc="The complete Python implementation of the function, as plain code.")
