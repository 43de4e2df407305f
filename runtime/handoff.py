"""The SOP line's handoff protocol over the pool (MetaGPT-style).

A sender publishes a ``handoff`` message to one receiver: a :class:`critiquelab.signatures.handoff.Handoff`
envelope (summary, artifact, blockers, next action) tagged with its ``stage``. The receiver
validates the artifact against the stage's typed schema and answers ``handoff.accepted``, or
returns it with the validation error as ``handoff.rejected``; the sender then tries again with
the error in hand. After ``max_retries`` rejections of one stage the receiver accepts the
artifact as it is (``validated: false`` on the acknowledgement), so the line always ends.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import ClassVar

from pydantic import BaseModel, ValidationError

from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult
from critiquelab.signatures.handoff import Handoff

# A receiver-side check beyond the schema (e.g. "the code compiles"); returns an error or "".
ArtifactCheck = Callable[[BaseModel], str]


def validation_error(exc: ValidationError) -> str:
    """A pydantic error as one line a model can act on: ``field: problem; …``."""
    problems = [f"{'.'.join(map(str, e['loc'])) or 'artifact'}: {e['msg']}" for e in exc.errors()[:5]]
    return "; ".join(problems)


class HandoffAgent(Agent):
    """An agent of the SOP line: it hands artifacts on and validates those handed to it.

    Subclasses set ``schemas`` (stage → the schema of the artifacts they receive), implement
    :meth:`accepted` (act on a validated artifact) and :meth:`returned` (try again after a
    rejection), and may add receiver-side checks in ``checks``.
    """

    schemas: ClassVar[Mapping[str, type[BaseModel]]] = {}

    def __init__(self, ctx: TaskContext, *, max_retries: int) -> None:
        super().__init__(ctx)
        self.max_retries = max_retries
        self.rejections: Counter[str] = Counter()
        self.checks: dict[str, ArtifactCheck] = {}
        self.listen([Intent.HANDOFF, Intent.HANDOFF_REJECTED], to_me_only=True)

    def hand_off(
        self, recipient: str, stage: str, *, artifact: str, summary: str, next_action: str,
        in_reply_to: str, step: RoleResult | None = None, blockers: list[str] | None = None,
        **metadata: object,
    ) -> Message:
        envelope = Handoff(
            summary=summary, artifact=artifact, blockers=blockers or [], next_action=next_action
        )
        return self.ctx.publish(
            intent=Intent.HANDOFF, sender=self.name, recipient=recipient, content=envelope.model_dump_json(),
            summary=f"{stage}: {summary}", in_reply_to=in_reply_to, step=step, stage=stage, **metadata,
        )

    def _validate(self, stage: str, envelope: Handoff) -> tuple[BaseModel | None, str]:
        try:
            artifact = self.schemas[stage].model_validate_json(envelope.artifact)
        except ValidationError as exc:
            return None, validation_error(exc)
        check = self.checks.get(stage)
        error = check(artifact) if check else ""
        return (None, error) if error else (artifact, "")

    def handle(self, message: Message) -> None:
        stage = str(message.metadata.get("stage", ""))
        if message.intent == Intent.HANDOFF_REJECTED:
            self.returned(stage, message)
            return
        envelope = Handoff.model_validate_json(message.content)  # built by a HandoffAgent: well-formed
        artifact, error = self._validate(stage, envelope)
        if error and self.rejections[stage] < self.max_retries:
            self.rejections[stage] += 1
            self.ctx.publish(
                intent=Intent.HANDOFF_REJECTED, sender=self.name, recipient=message.sender,
                content=error, summary=f"{stage} returned: {error[:120]}", in_reply_to=message.id,
                stage=stage,
            )
            return
        self.ctx.publish(
            intent=Intent.HANDOFF_ACCEPTED, sender=self.name, recipient=message.sender,
            summary=f"{stage} accepted" + ("" if artifact else " unvalidated (retries used up)"),
            in_reply_to=message.id, stage=stage, validated=artifact is not None, error=error,
        )
        self.accepted(stage, artifact, envelope, message)

    def accepted(self, stage: str, artifact: BaseModel | None, envelope: Handoff, message: Message) -> None:
        """Act on an acknowledged artifact (``None``: it failed validation and retries are used
        up; ``envelope.artifact`` still holds what was sent)."""
        raise NotImplementedError(f"{type(self).__name__} receives no handoffs")

    def returned(self, stage: str, rejection: Message) -> None:
        """Produce the artifact of ``stage`` again, knowing why it was returned."""
        raise NotImplementedError(f"{type(self).__name__} sends no handoffs")


def code_of(envelope: Handoff) -> str:
    """The code of a code handoff, also one that failed validation (retries used up)."""
    try:
        return str(json.loads(envelope.artifact).get("code", ""))
    except (ValueError, AttributeError):
        return envelope.artifact
