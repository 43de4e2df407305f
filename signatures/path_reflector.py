"""The path reflector of tree search: why a line of attempts failed, as advice for the next."""

from __future__ import annotations

import dspy


class PathReflector(dspy.Signature):
    """You review a failed line of attempts at a programming problem: each attempt's code and
    what it did on the problem's visible examples. Say in a few sentences what the attempts got
    wrong and what a next attempt must do differently. Be specific to this problem."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    attempts: str = dspy.InputField(desc="The attempts, oldest first, each with its feedback.")
    reflection: str = dspy.OutputField(desc="What went wrong and what to do differently.")
