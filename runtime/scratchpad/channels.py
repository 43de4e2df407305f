"""Channels of a shared scratchpad: their types, conflict policies and how a write changes them.

A channel is one of three types: ``append`` (a list that grows by one entry per write),
``replace`` (one value, the last written) and ``merge`` (a dict updated key by key). The
functions here are pure: the live scratchpad and the replay of its events both change state
only through :func:`apply_delta`, so the two cannot drift apart.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ChannelType = Literal["append", "replace", "merge"]
ConflictPolicy = Literal["last_write_wins", "merge", "reject"]


class ChannelSpec(BaseModel):
    """One named channel: what a write does to it and what happens when two writes collide."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="The channel's name, unique in its scratchpad.")
    type: ChannelType = Field(
        description="append: a list, each write adds one entry; replace: one value, each write "
        "replaces it; merge: a dict, each write updates the keys it gives."
    )
    conflict_policy: ConflictPolicy = Field(
        default="last_write_wins",
        description="A write whose read version is no longer current: last_write_wins applies it "
        "anyway; merge applies what does not collide (append: the entry; merge: the keys nobody "
        "else changed since the writer read); reject refuses it (the writer must read again).",
    )

    @model_validator(mode="after")
    def _policy_fits_type(self) -> ChannelSpec:
        if self.type == "replace" and self.conflict_policy == "merge":
            raise ValueError(
                f"channel '{self.name}': a replace channel holds one value and cannot merge; "
                "use last_write_wins or reject"
            )
        return self


def initial_value(kind: ChannelType) -> Any:
    return {"append": [], "replace": None, "merge": {}}[kind]


def check_delta(kind: ChannelType, delta: Any) -> str:
    """Why ``delta`` cannot be written to a channel of ``kind`` ('' when it can)."""
    if kind == "merge" and not (isinstance(delta, dict) and all(isinstance(k, str) for k in delta)):
        return "a merge channel takes a mapping of string keys to values"
    try:
        json.dumps(delta)
    except (TypeError, ValueError):
        return "the value must be JSON-serialisable (it is persisted as an event)"
    return ""


def apply_delta(kind: ChannelType, value: Any, delta: Any, *, dropped: int = 0) -> Any:
    """The channel's value after a write of ``delta``; ``dropped`` oldest entries of an append
    channel are removed first (the size cap's ``drop_oldest`` policy). ``value`` is not modified."""
    if kind == "append":
        return [*copy.deepcopy(value[dropped:]), copy.deepcopy(delta)]
    if kind == "replace":
        return copy.deepcopy(delta)
    return {**copy.deepcopy(value), **copy.deepcopy(delta)}


def size_bytes(values: dict[str, Any]) -> int:
    """What the scratchpad's content weighs, as compact UTF-8 JSON (what the cap limits)."""
    return len(json.dumps(values, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode())
