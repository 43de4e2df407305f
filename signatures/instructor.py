"""The instructor of CAMEL role-play: one instruction at a time, until the task is done."""

from __future__ import annotations

import dspy


class Instructor(dspy.Signature):
    """You are the instructor in a pair of programmers; the assistant writes all the code. Read
    the task, the conversation so far and the assistant's current code with its results on the
    problem's examples. Give exactly one next instruction in plain words — never code — that
    moves the code toward a correct solution, and never repeat an earlier instruction. When the
    code is correct and complete, set task_done to true."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    specified_task: str = dspy.InputField(desc="The task as the task specifier stated it.")
    conversation: str = dspy.InputField(desc="Your earlier instructions, numbered, or 'none'.")
    current_code: str = dspy.InputField(desc="The assistant's latest code, or 'none'.")
    execution_feedback: str = dspy.InputField(desc="The code's results on the problem's examples, or 'none'.")
    instruction: str = dspy.OutputField(desc="The one next instruction, in plain words (empty when done).")
    task_done: bool = dspy.OutputField(desc="True when the code is correct and complete.")
