"""The handoff envelope of the SOP line: what every artifact message between roles carries."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Handoff(BaseModel):
    """One role handing its artifact to the next (MetaGPT-style): the receiver validates
    ``artifact`` against the stage's typed schema, then acknowledges it or returns it."""

    summary: str = Field(description="One line: what is handed over.")
    artifact: str = Field(description="The artifact as JSON of its stage's schema (Spec, Design, …).")
    blockers: list[str] = Field(default_factory=list, description="What stands in the receiver's way.")
    next_action: str = Field(description="What the receiver is expected to do with it.")
