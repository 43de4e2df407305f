"""The judge (referee) role: choose or merge the final solution of a debate."""

from __future__ import annotations

import dspy


class Judge(dspy.Signature):
    """You are the referee of a debate among programmers. Read the problem, the final numbered
    solutions and the debate transcript. Choose the solution most likely to be correct on every
    requirement and example. Only if none is right as is but combining them fixes it, write a
    merged solution."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    proposals: str = dspy.InputField(desc="The debaters' final solutions, numbered from 1.")
    transcript: str = dspy.InputField(desc="The debaters' arguments, round by round.")
    choice: int = dspy.OutputField(desc="The number of the chosen solution.")
    # As the debater's (critiquelab.signatures.debater): fields that say what they must not hold, so the reply
    # does not copy solutions or the docstring (measured: the 0.5B filled merged_code with the
    # prompt's stub, docstring and all, where it was to stay empty).
    rationale: str = dspy.OutputField(desc="One or two sentences of prose, no code, explaining the choice.")
    merged_code: str = dspy.OutputField(
        desc="Empty unless no solution is right as is; then the merged function's def line and body, "
        "without the docstring."
    )


GROUNDED_PROPOSALS_DESC = (
    "The debaters' final solutions, numbered from 1, each followed by what it did on the examples "
    "shown in the problem."
)
GROUNDED_NOTE = (
    " Each solution was run on the examples shown in the problem: never choose one that fails an "
    "example while another passes them all."
)


def grounded_judge() -> type[dspy.Signature]:
    """:class:`Judge` for an execution-grounded debate: each numbered solution is followed by what
    it did on the prompt's visible examples."""
    signature: type[dspy.Signature] = Judge.with_instructions(Judge.instructions + GROUNDED_NOTE)
    updated: type[dspy.Signature] = signature.with_updated_fields("proposals", desc=GROUNDED_PROPOSALS_DESC)
    return updated
