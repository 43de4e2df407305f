"""The scratchpad's events: every change (and every refused or colliding write) is a message on
the pool, persisted like any other, so the scratchpad's state is a replay of them.

A message's ``content`` is the event as JSON (the model below for its intent); ``metadata`` repeats
the scratchpad id, channel and version so the events can be queried without parsing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from critiquelab.runtime.pool.messages import Intent
from critiquelab.runtime.scratchpad.channels import ChannelSpec

OverflowPolicy = Literal["reject", "drop_oldest"]


class ScratchpadIntent:
    """The scratchpad's events among the pool's intents, by their short names here."""

    INIT = Intent.SCRATCHPAD_INIT
    UPDATE = Intent.SCRATCHPAD_UPDATE
    READ = Intent.SCRATCHPAD_READ
    CONFLICT = Intent.SCRATCHPAD_CONFLICT
    REFUSED = Intent.SCRATCHPAD_REFUSED


class InitEvent(BaseModel):
    """The scratchpad was created: its channels and size rules."""

    scratchpad_id: str = Field(description="Which scratchpad (a thread may hold several).")
    channels: list[ChannelSpec] = Field(description="The channels, all empty at first.")
    max_size_kb: float = Field(description="Cap on the content's size (compact JSON), in KiB.")
    on_overflow: OverflowPolicy = Field(description="What a write past the cap does.")


class UpdateEvent(BaseModel):
    """One applied write: replaying these in order rebuilds the state."""

    scratchpad_id: str
    agent: str = Field(description="Who wrote.")
    channel: str
    operation: Literal["append", "replace", "merge"] = Field(description="The channel's type.")
    delta: Any = Field(description="What was applied (after conflict resolution).")
    version: int = Field(description="The channel's version after this write (1 for the first).")
    read_version: int = Field(description="The version the writer had read.")
    dropped: int = Field(default=0, description="Oldest entries dropped to stay under the cap.")
    size_bytes: int = Field(description="The scratchpad's size after the write.")


class ConflictEvent(BaseModel):
    """A write whose read version was no longer current, and how the channel's policy resolved it."""

    scratchpad_id: str
    agent: str
    channel: str
    policy: Literal["last_write_wins", "merge", "reject"]
    read_version: int
    current_version: int
    resolution: Literal["overwrote", "appended", "merged", "rejected"]
    conflicting_keys: list[str] = Field(
        default_factory=list, description="merge channels: keys changed by others since the read; "
        "their values were kept."
    )


class RefusedEvent(BaseModel):
    """A write that was not applied, and why (the writer is told the same)."""

    scratchpad_id: str
    agent: str
    channel: str
    reason: Literal["access", "unknown_channel", "bad_value", "size_cap", "conflict"]
    detail: str


class ReadEvent(BaseModel):
    """An agent read these channels at these versions (logged only when asked for)."""

    scratchpad_id: str
    agent: str
    versions: dict[str, int]


EVENT_MODELS: dict[str, type[BaseModel]] = {
    ScratchpadIntent.INIT: InitEvent,
    ScratchpadIntent.UPDATE: UpdateEvent,
    ScratchpadIntent.READ: ReadEvent,
    ScratchpadIntent.CONFLICT: ConflictEvent,
    ScratchpadIntent.REFUSED: RefusedEvent,
}
