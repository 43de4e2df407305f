"""The structured message agents publish to and consume from the pool.

Agents never call each other: everything one agent tells another is a Message. Every role
call leaves one, with the role's inputs, outputs, LM usage and latency in ``metadata`` — the
traces the optimisers learn from.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import BaseModel, Field


class Intent:
    """Well-known intents (free strings are allowed too; these are the ones pipelines use)."""

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


def _new_id() -> str:
    return uuid.uuid4().hex


class Message(BaseModel):
    """One message on the pool. ``recipient=None`` is a broadcast."""

    id: str = Field(default_factory=_new_id)
    task_id: str = Field(description="The problem this message is about.")
    thread_id: str = Field(description="One conversation about the task (one pipeline run of it).")
    intent: str = Field(description="What the message is: see Intent.")
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
