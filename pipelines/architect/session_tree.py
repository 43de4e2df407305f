"""A run's messages as a session tree: the orchestrator's session, and under it one sub-session
per delegation (a developer's task attempt, a review), each linked to the message that
triggered it. Exported as JSON that validates against :func:`session_tree_schema`, a JSON
Schema generated from the team contracts.

Sub-sessions live in the task's pool thread (the runner logs a problem's messages by thread);
``metadata["session"]`` names a message's session, ``parent_session`` and ``trigger`` link it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.team_contracts import (
    ArchitectDecision,
    ArchitectPlan,
    DeveloperInput,
    DeveloperOutput,
    ReviewerInput,
    ReviewerOutput,
)

SessionKind = Literal["orchestrator", "developer", "reviewer"]
CONTRACTS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (ArchitectPlan, ArchitectDecision, DeveloperInput, DeveloperOutput, ReviewerInput,
                  ReviewerOutput)
}
ContractName = Literal["ArchitectPlan", "ArchitectDecision", "DeveloperInput", "DeveloperOutput",
                       "ReviewerInput", "ReviewerOutput"]
Payload = (ArchitectPlan | ArchitectDecision | DeveloperInput | DeveloperOutput | ReviewerInput
           | ReviewerOutput)


class SessionMessage(BaseModel):
    """One message of a session; ``payload`` is its contract, when it carries one."""

    id: str
    intent: Intent
    sender: str
    recipient: str | None = None
    summary: str = ""
    in_reply_to: str | None = Field(default=None, description="The message this answers.")
    contract: ContractName | None = Field(default=None, description="Which contract ``payload`` is.")
    payload: Payload | None = Field(default=None, description="The contract the message carries.")
    text: str = Field(default="", description="The content, when it is no contract (code, raw replies).")


class Session(BaseModel):
    """One session: the orchestrator's, or a delegation's, with its own sub-sessions."""

    session_id: str
    kind: SessionKind
    agent: str = Field(description="Who works in it.")
    parent_session: str | None = None
    trigger_message_id: str | None = Field(default=None, description="The message that opened it.")
    messages: list[SessionMessage] = Field(default_factory=list)
    children: list[Session] = Field(default_factory=list)


class SessionTree(BaseModel):
    """A task's sessions, rooted at the orchestrator's."""

    task_id: str
    thread_id: str
    root: Session


def session_tree_schema() -> dict[str, Any]:
    """The JSON Schema an exported session tree validates against."""
    return SessionTree.model_json_schema()


def _entry(message: Message) -> SessionMessage:
    contract = message.metadata.get("contract")
    payload = CONTRACTS[contract].model_validate_json(message.content) if contract in CONTRACTS else None
    return SessionMessage(
        id=message.id, intent=message.intent, sender=message.sender, recipient=message.recipient,
        summary=message.summary, in_reply_to=message.in_reply_to,
        contract=contract if payload is not None else None, payload=payload,
        text="" if payload is not None else message.content,
    )


def session_tree(history: Sequence[Message], *, root_session: str = "architect") -> SessionTree:
    """The session tree of one thread's messages (a message without a session belongs to the root)."""
    if not history:
        raise ValueError("a session tree needs the thread's messages; got none")
    sessions: dict[str, Session] = {}
    for message in history:
        meta = message.metadata
        session_id = str(meta.get("session") or root_session)
        session = sessions.get(session_id)
        if session is None:
            session = sessions[session_id] = Session(
                session_id=session_id, kind=meta.get("session_kind", "orchestrator"),
                agent=str(meta.get("session_agent", message.sender)),
                parent_session=meta.get("parent_session"), trigger_message_id=meta.get("trigger"),
            )
        session.messages.append(_entry(message))
    root = sessions.setdefault(root_session, Session(session_id=root_session, kind="orchestrator", agent=""))
    for session in sessions.values():
        if session is not root:
            sessions.get(session.parent_session or root_session, root).children.append(session)
    return SessionTree(task_id=history[0].task_id, thread_id=history[0].thread_id, root=root)


def export_session_tree(history: Sequence[Message]) -> dict[str, Any]:
    """The session tree as JSON-ready data (see :func:`session_tree_schema`)."""
    return session_tree(history).model_dump(mode="json")
