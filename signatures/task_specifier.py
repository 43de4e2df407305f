"""The task specifier of CAMEL role-play: the task made specific before the roles start."""

from __future__ import annotations

import dspy


class TaskSpecifier(dspy.Signature):
    """You make programming tasks specific. Restate the problem as a concrete task for a pair
    of programmers in a few sentences: what the function takes, what it returns, the rules and
    edge cases the statement implies, and its examples. Be precise; do not write code."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    specified_task: str = dspy.OutputField(desc="The specific task, in a few sentences.")
