"""The typed input field through which a role receives what memory recalled for it.

Added to a role's signature only when memory is on, so prompts without memory stay exactly as
they were; DSPy optimisers and `export` see the field like any other input.
"""

from __future__ import annotations

import dspy
from dspy.signatures.signature import Signature

MEMORIES_FIELD = "memories"
MEMORIES_DESC = (
    "Lessons and skills recalled from earlier tasks, one per line with its id; use those that "
    "apply to this problem, ignore the rest."
)


def with_memories(signature: type[Signature]) -> type[Signature]:
    """``signature`` with the ``memories`` input field appended (itself if it has one)."""
    if MEMORIES_FIELD in signature.input_fields:
        return signature
    field = dspy.InputField(desc=MEMORIES_DESC)
    extended: type[Signature] = signature.append(MEMORIES_FIELD, field, type_=str)
    return extended


def has_memories(signature: type[Signature]) -> bool:
    return MEMORIES_FIELD in signature.input_fields


# Each role's signature is recognised by its output fields: loading exported prompts rebuilds a
# signature (its class name is lost), its fields stay.
ROLE_OUTPUTS: dict[str, frozenset[str]] = {
    "coder": frozenset({"code"}),
    "fixer": frozenset({"revised_code"}),
    "critic": frozenset({"verdict", "findings", "summary"}),
    "debater": frozenset({"argument", "revised_code"}),
    "judge": frozenset({"choice", "rationale", "merged_code"}),
    "meta_critic": frozenset({"wrong_findings", "missing_issues", "review_is_sound"}),
    "self_feedback": frozenset({"is_correct", "feedback"}),
    "repairer": frozenset({"repaired_code"}),
}


def role_of(signature: type[Signature]) -> str | None:
    """The role whose signature ``signature`` is, by its output fields."""
    outputs = frozenset(signature.output_fields)
    return next((role for role, names in ROLE_OUTPUTS.items() if names == outputs), None)
