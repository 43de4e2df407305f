"""The structured message agents publish to and consume from the pool.

Agents never call each other: everything one agent tells another is a Message. Every role
call leaves one, with the role's inputs, outputs, LM usage and latency in ``metadata`` — the
traces the optimisers learn from.
"""

from __future__ import annotations

import time
import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from critiquelab.core.errors import UserError


class Intent(StrEnum):
    """What a message is. Every intent a pipeline publishes is one of these; the values are what
    stores, Chroma metadata and message logs hold, so a value never changes once shipped (a
    member is a ``str`` equal to its value, so stored filters and JSON stay as they were)."""

    TASK_ASSIGNMENT = "task_assignment"
    OUTPUT_COMPLETE = "output.complete"
    CRITIQUE = "critique"
    META_CRITIQUE = "meta_critique"
    FIX = "fix"
    EXECUTION_FEEDBACK = "execution_feedback"
    PROPOSAL = "proposal"
    ARGUMENT = "argument"
    VERDICT = "verdict"
    REFLECTION = "reflection"
    STATUS = "status"
    GENERATED_TESTS = "generated_tests"
    HANDOFF = "handoff"
    HANDOFF_ACCEPTED = "handoff.accepted"
    HANDOFF_REJECTED = "handoff.rejected"
    QA_REPORT = "qa_report"
    PANEL_REVIEW = "panel_review"
    TASK_SPECIFIED = "task_specified"
    INSTRUCTION = "instruction"
    ANSWER = "answer"
    INPUT_REQUEST = "input_request"
    GENERATED_INPUTS = "generated_inputs"
    JUDGEMENT_REQUEST = "judgement_request"
    JUDGEMENT = "judgement"
    # The architect team's plan, its decisions on returned work, and the review it asks for.
    PLAN = "plan"
    DECISION = "decision"
    REVIEW_REQUEST = "review_request"
    # Tree search: a node's evaluation by the value role.
    VALUE = "value"
    # The scratchpad's events (critiquelab.runtime.scratchpad.events): its state is a replay of them.
    SCRATCHPAD_INIT = "scratchpad.init"
    SCRATCHPAD_UPDATE = "scratchpad.update"
    SCRATCHPAD_READ = "scratchpad.read"
    SCRATCHPAD_CONFLICT = "scratchpad.conflict"
    SCRATCHPAD_REFUSED = "scratchpad.refused"


class UnknownIntentError(UserError):
    """A stored message whose intent this version does not know (a pool written by another
    version, or edited by hand): one error naming it, not a failure deep inside a reader."""


def intent_of(text: str, message_id: str) -> Intent:
    """The :class:`Intent` a stored message's intent string names."""
    try:
        return Intent(text)
    except ValueError:
        known = ", ".join(member.value for member in Intent)
        # One message argument, so the error pickles across the Chroma child process as it is.
        raise UnknownIntentError(
            f"stored message {message_id}: unknown intent {text!r} (known: {known}); "
            "was the pool written by another version of critiquelab?"
        ) from None


def _new_id() -> str:
    return uuid.uuid4().hex


class Message(BaseModel):
    """One message on the pool. ``recipient=None`` is a broadcast."""

    id: str = Field(default_factory=_new_id)
    task_id: str = Field(description="The problem this message is about.")
    thread_id: str = Field(description="One conversation about the task (one pipeline run of it).")
    intent: Intent = Field(description="What the message is.")
    sender: str = Field(description="Agent name.")
    recipient: str | None = Field(default=None, description="Agent name, or None to broadcast.")
    summary: str = Field(default="", description="One line a reader (or a search) can use.")
    content: str = Field(default="", description="The payload: code, a review as JSON, …")
    in_reply_to: str | None = Field(default=None, description="Id of the message this answers.")
    created_at: float = Field(default_factory=time.time, description="Unix time of publishing.")
    run_id: str = Field(default="", description="The experiment run (MLflow child run) it belongs to.")
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="JSON-serialisable extras: role inputs/outputs, LM usage, latency, verdict …",
    )
