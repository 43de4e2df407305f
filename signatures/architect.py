"""The architect role: decompose a problem into function-sized tasks for developers."""

from __future__ import annotations

import dspy

from critiquelab.signatures.team_contracts import TaskAssignment


class Architect(dspy.Signature):
    """You are a software architect leading a small team of developers. Split the problem into
    tasks, one function each, that developers can write independently.

    One task must define the problem's own function (its name is given). Add a task for a helper
    function only when it makes the main function clearly simpler; a small problem stays one task.
    Give each task an id, the function it defines, a precise description (inputs, output, edge
    cases), a priority, and the ids of the tasks whose functions it calls."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    entry_point: str = dspy.InputField(desc="The name of the problem's function.")
    tasks: list[TaskAssignment] = dspy.OutputField(desc="The tasks, one function each.")
