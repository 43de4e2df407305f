"""The debater role: defend or revise a solution after reading the other debaters'."""

from __future__ import annotations

import dspy


class Debater(dspy.Signature):
    """You are one of several programmers debating the solution to a problem. Read the other
    debaters' solutions and arguments, check yours and theirs against the problem statement and
    its examples, then argue briefly for the best approach and give your revised solution (keep
    yours if it is right; adopt a better idea if you find one). Write code only in
    `revised_code`, once: the argument is prose, and the function need not repeat the docstring."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    own_code: str = dspy.InputField(desc="Your current solution.")
    others: str = dspy.InputField(desc="The other debaters' current solutions and arguments.")
    # Measured (issue #57): asked only for "two or three sentences", the 0.5B put its whole revised
    # function, docstring included, into the argument and then wrote it again as revised_code, so
    # replies on long prompts ran into max_tokens. Both fields now say what they must not hold.
    argument: str = dspy.OutputField(
        desc="Two or three sentences of prose, no code: which approach is right and why."
    )
    revised_code: str = dspy.OutputField(
        desc="Your complete revised function as plain code: its def line and body, without the "
        "docstring, tests or examples."
    )


OWN_RESULTS_DESC = (
    "What your solution did on the examples shown in the problem: PASS, or FAIL with the call, what "
    "it returned or raised and the expected value."
)
GROUNDED_OTHERS_DESC = (
    "The other debaters' current solutions and arguments, each followed by what it did on the "
    "examples shown in the problem."
)
GROUNDED_NOTE = (
    " Each solution was run on the examples shown in the problem: a solution that fails one of "
    "them is wrong; fix it or adopt one that passes them."
)


def grounded_debater() -> type[dspy.Signature]:
    """:class:`Debater` for an execution-grounded debate: it also reads, beside each solution,
    what it did on the prompt's visible examples (``own_results`` appended last, so a served
    model's prompt cache still holds the inputs every debate shares)."""
    signature: type[dspy.Signature] = Debater.with_instructions(Debater.instructions + GROUNDED_NOTE)
    signature = signature.with_updated_fields("others", desc=GROUNDED_OTHERS_DESC)
    extended: type[dspy.Signature] = signature.append(
        "own_results", dspy.InputField(desc=OWN_RESULTS_DESC), type_=str
    )
    return extended
