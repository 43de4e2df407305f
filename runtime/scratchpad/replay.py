"""A scratchpad's state, and its reconstruction from the events on the pool.

The live scratchpad keeps a :class:`ScratchpadState` and changes it only by applying the update
events it publishes, exactly as :func:`replay` applies them later: the state after any event is
the replay of the events up to it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.messages import Message
from critiquelab.runtime.pool.store import seq_of
from critiquelab.runtime.scratchpad.channels import ChannelSpec, apply_delta, initial_value
from critiquelab.runtime.scratchpad.events import InitEvent, ScratchpadIntent, UpdateEvent


@dataclass
class ScratchpadState:
    """Channel values and versions; for merge channels, the version that last wrote each key
    (what decides a merge conflict)."""

    init: InitEvent
    values: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    key_versions: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def empty(cls, init: InitEvent) -> ScratchpadState:
        return cls(
            init,
            values={c.name: initial_value(c.type) for c in init.channels},
            versions={c.name: 0 for c in init.channels},
            key_versions={c.name: {} for c in init.channels if c.type == "merge"},
        )

    def spec(self, channel: str) -> ChannelSpec | None:
        return next((c for c in self.init.channels if c.name == channel), None)

    def apply(self, event: UpdateEvent) -> None:
        spec = self.spec(event.channel)
        if spec is None:
            raise ValueError(f"scratchpad event for unknown channel '{event.channel}'")
        self.values[event.channel] = apply_delta(
            spec.type, self.values[event.channel], event.delta, dropped=event.dropped
        )
        self.versions[event.channel] = event.version
        if spec.type == "merge":
            self.key_versions[event.channel].update(dict.fromkeys(event.delta, event.version))

    def snapshot(self) -> dict[str, Any]:
        """Values and versions, as plain data (for comparing a replay with the live state)."""
        return {"values": copy.deepcopy(self.values), "versions": dict(self.versions),
                "key_versions": copy.deepcopy(self.key_versions)}


def replay_steps(
    messages: Iterable[Message], scratchpad_id: str
) -> Iterator[tuple[Message, ScratchpadState]]:
    """Each event of scratchpad ``scratchpad_id`` among ``messages`` (any order: sorted by the
    pool's sequence number) with the state right after it, in one pass. The state is one object
    updated in place: read it before taking the next step. A thread with no init event for it is
    a :class:`UserError`."""
    mine = sorted(
        (m for m in messages if m.intent.startswith("scratchpad.")
         and m.metadata.get("scratchpad_id") == scratchpad_id),
        key=seq_of,
    )
    inits = [m for m in mine if m.intent == ScratchpadIntent.INIT]
    if not inits:
        raise UserError(f"scratchpad '{scratchpad_id}': no init event on the pool; nothing to replay")
    state = ScratchpadState.empty(InitEvent.model_validate_json(inits[0].content))
    for message in mine:
        if message.intent == ScratchpadIntent.UPDATE:
            state.apply(UpdateEvent.model_validate_json(message.content))
        yield message, state


def replay(
    messages: Iterable[Message], scratchpad_id: str, *, upto_seq: int | None = None
) -> ScratchpadState:
    """The state of scratchpad ``scratchpad_id`` rebuilt from its events among ``messages``,
    optionally only those up to ``upto_seq``. A thread with no init event for it is a
    :class:`UserError`."""
    if upto_seq is not None:
        messages = [m for m in messages if not m.intent.startswith("scratchpad.") or seq_of(m) <= upto_seq]
    state = None
    for _, state in replay_steps(messages, scratchpad_id):  # noqa: B007 (the last state is the answer)
        pass
    assert state is not None  # replay_steps yields the init event at least, or raises
    return state
