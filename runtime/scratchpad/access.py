"""Who may read and write which channels of a scratchpad."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AgentAccess(BaseModel):
    """One agent's rights. A write outside ``write_channels`` is refused and recorded; a read
    outside ``read_channels`` returns nothing for that channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read_channels: frozenset[str] = Field(default=frozenset(), description="Channels it may read.")
    write_channels: frozenset[str] = Field(default=frozenset(), description="Channels it may write.")

    def may_read(self, channel: str) -> bool:
        return channel in self.read_channels

    def may_write(self, channel: str) -> bool:
        return channel in self.write_channels
