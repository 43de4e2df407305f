"""SharedScratchpad: channels several agents read and write while they work, under access rules
and a size cap, with concurrent writes detected by version and resolved by channel policy.

Every write the scratchpad applies, refuses or has to reconcile is published as an event on the
task's pool thread (see :mod:`critiquelab.runtime.scratchpad.events`); the live state changes only by
applying the update events it publishes, and one lock covers deciding, publishing and applying,
so the pool's order of the events is the order they took effect and a replay of them
(:func:`critiquelab.runtime.scratchpad.replay.replay`) gives the same state — after a run with agents in
parallel threads, or in a later process that resumes an interrupted run.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.messages import Intent
from critiquelab.runtime.scratchpad.access import AgentAccess
from critiquelab.runtime.scratchpad.channels import ChannelSpec, apply_delta, check_delta, size_bytes
from critiquelab.runtime.scratchpad.events import (
    ConflictEvent,
    InitEvent,
    OverflowPolicy,
    ReadEvent,
    RefusedEvent,
    ScratchpadIntent,
    UpdateEvent,
)
from critiquelab.runtime.scratchpad.replay import ScratchpadState, replay


class ScratchpadConfig(BaseModel):
    """The channels of a scratchpad and its size rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channels: list[ChannelSpec] = Field(min_length=1, description="The channels, names unique.")
    max_size_kb: float = Field(
        default=64.0, gt=0, description="Cap on the content (all channels, compact JSON) in KiB, "
        "enforced on every write."
    )
    on_overflow: OverflowPolicy = Field(
        default="reject",
        description="A write that would pass the cap: reject refuses it and the writer gets the "
        "error; drop_oldest, on an append channel, drops that channel's oldest entries until the "
        "write fits (recorded in the event) and rejects only what cannot fit even then.",
    )
    log_reads: bool = Field(default=False, description="Publish a read event for every read.")

    @model_validator(mode="after")
    def _unique_names(self) -> ScratchpadConfig:
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise ValueError(f"scratchpad channel names must be unique, got {names}")
        return self


@dataclass(frozen=True)
class Snapshot:
    """What one agent read: the values and versions of the channels it may read."""

    values: dict[str, Any]
    versions: dict[str, int]


@dataclass(frozen=True)
class WriteResult:
    """What became of a write. ``error`` is what the agent is told when it was not applied."""

    applied: bool
    version: int
    error: str = ""
    conflict: bool = False


class SharedScratchpad:
    """Channels shared by the agents of one task, as events on its pool thread.

    Build it with :meth:`create` (publishes the init event) or :meth:`resume` (replays the
    events a thread already holds, e.g. after an interrupted run). Thread-safe.
    """

    def __init__(
        self, ctx: TaskContext, scratchpad_id: str, state: ScratchpadState,
        access: Mapping[str, AgentAccess], *, log_reads: bool = False,
    ) -> None:
        self.ctx = ctx
        self.scratchpad_id = scratchpad_id
        self._state = state
        self._access = dict(access)
        self._log_reads = log_reads
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls, ctx: TaskContext, config: ScratchpadConfig, access: Mapping[str, AgentAccess],
        *, scratchpad_id: str = "scratchpad",
    ) -> SharedScratchpad:
        init = InitEvent(
            scratchpad_id=scratchpad_id, channels=config.channels, max_size_kb=config.max_size_kb,
            on_overflow=config.on_overflow,
        )
        pad = cls(ctx, scratchpad_id, ScratchpadState.empty(init), access, log_reads=config.log_reads)
        pad._publish(ScratchpadIntent.INIT, "scratchpad", init, summary=f"scratchpad {scratchpad_id} created")
        return pad

    @classmethod
    def resume(
        cls, ctx: TaskContext, access: Mapping[str, AgentAccess], *, scratchpad_id: str = "scratchpad",
        log_reads: bool = False,
    ) -> SharedScratchpad:
        """The scratchpad as its events on ``ctx``'s thread (this and earlier sessions) left it."""
        state = replay(ctx.pool.history(thread_id=ctx.thread_id), scratchpad_id)
        return cls(ctx, scratchpad_id, state, access, log_reads=log_reads)

    # --- reading ----------------------------------------------------------------------------

    def read(self, agent: str, channels: list[str] | None = None) -> Snapshot:
        """The channels ``agent`` may read (of ``channels``, default all); others are left out."""
        rights = self._access.get(agent, AgentAccess())
        with self._lock:
            names = [n for n in (channels or list(self._state.values)) if n in self._state.values]
            allowed = [n for n in names if rights.may_read(n)]
            snapshot = Snapshot(
                {n: copy.deepcopy(self._state.values[n]) for n in allowed},
                {n: self._state.versions[n] for n in allowed},
            )
            if self._log_reads and allowed:
                self._publish(ScratchpadIntent.READ, agent, ReadEvent(
                    scratchpad_id=self.scratchpad_id, agent=agent, versions=snapshot.versions,
                ), summary=f"{agent} read {', '.join(allowed)}")
        return snapshot

    def state(self) -> dict[str, Any]:
        """Every channel's value and version (the researcher's view, not an agent's)."""
        with self._lock:
            return self._state.snapshot()

    def size_bytes(self) -> int:
        with self._lock:
            return size_bytes(self._state.values)

    # --- writing ----------------------------------------------------------------------------

    def write(
        self, agent: str, channel: str, delta: Any, *, read_version: int, **metadata: Any
    ) -> WriteResult:
        """Write ``delta`` to ``channel`` as ``agent``, who last read the channel at
        ``read_version``. Refusals and conflicts are published as events and returned.
        ``metadata`` goes on the event message that records the outcome (an update or a
        refusal): e.g. the trace of the role call that produced ``delta``."""
        with self._lock:
            spec = self._state.spec(channel)
            current = self._state.versions.get(channel, 0)
            if spec is None:
                return self._refuse(agent, channel, "unknown_channel", f"no channel '{channel}'", current,
                                    metadata)
            if not self._access.get(agent, AgentAccess()).may_write(channel):
                return self._refuse(agent, channel, "access", f"{agent} may not write '{channel}'", current,
                                    metadata)
            problem = check_delta(spec.type, delta)
            if problem:
                return self._refuse(agent, channel, "bad_value", problem, current, metadata)
            conflict = read_version != current
            if conflict:
                delta, resolution, keys = self._resolve(spec, delta, read_version)
                self._publish(ScratchpadIntent.CONFLICT, agent, ConflictEvent(
                    scratchpad_id=self.scratchpad_id, agent=agent, channel=channel,
                    policy=spec.conflict_policy, read_version=read_version, current_version=current,
                    resolution=resolution, conflicting_keys=keys,
                ), summary=f"{agent} wrote '{channel}' read at {read_version}, now {current}: {resolution}")
                if resolution == "rejected":
                    return self._refuse(
                        agent, channel, "conflict",
                        f"'{channel}' changed since you read it (version {read_version}, now {current}); "
                        "read it again", current, metadata, conflict=True,
                    )
            dropped, error = self._fit(spec, delta)
            if error:
                return self._refuse(agent, channel, "size_cap", error, current, metadata, conflict=conflict)
            update = UpdateEvent(
                scratchpad_id=self.scratchpad_id, agent=agent, channel=channel, operation=spec.type,
                delta=delta, version=current + 1, read_version=read_version, dropped=dropped,
                size_bytes=self._size_after(spec, delta, dropped),
            )
            self._publish(ScratchpadIntent.UPDATE, agent, update, summary=f"{agent} {spec.type} '{channel}'",
                          **metadata)
            self._state.apply(update)
            return WriteResult(True, update.version, conflict=conflict)

    def _resolve(self, spec: ChannelSpec, delta: Any, read_version: int) -> tuple[Any, str, list[str]]:
        """The delta to apply under the channel's policy, the resolution's name, colliding keys."""
        if spec.conflict_policy == "reject":
            return delta, "rejected", []
        if spec.conflict_policy == "last_write_wins":
            return delta, "overwrote", []
        if spec.type == "append":
            return delta, "appended", []
        changed = {k for k, v in self._state.key_versions[spec.name].items() if v > read_version}
        colliding = sorted(changed & set(delta))
        return {k: v for k, v in delta.items() if k not in changed}, "merged", colliding

    def _size_after(self, spec: ChannelSpec, delta: Any, dropped: int) -> int:
        values = dict(self._state.values)
        values[spec.name] = apply_delta(spec.type, values[spec.name], delta, dropped=dropped)
        return size_bytes(values)

    def _fit(self, spec: ChannelSpec, delta: Any) -> tuple[int, str]:
        """Oldest entries to drop so the write fits the cap, or why it cannot."""
        cap = int(self._state.init.max_size_kb * 1024)
        if self._size_after(spec, delta, 0) <= cap:
            return 0, ""
        if self._state.init.on_overflow == "drop_oldest" and spec.type == "append":
            for dropped in range(1, len(self._state.values[spec.name]) + 1):
                if self._size_after(spec, delta, dropped) <= cap:
                    return dropped, ""
        size = self._size_after(spec, delta, 0)
        return 0, (f"the scratchpad would hold {size} bytes, over its cap of "
                   f"{self._state.init.max_size_kb:g} KiB ({cap} bytes); write less")

    def _refuse(
        self, agent: str, channel: str, reason: str, detail: str, current: int,
        metadata: dict[str, Any], *, conflict: bool = False,
    ) -> WriteResult:
        self._publish(ScratchpadIntent.REFUSED, agent, RefusedEvent(
            scratchpad_id=self.scratchpad_id, agent=agent, channel=channel, reason=reason, detail=detail,
        ), summary=f"refused: {agent} → '{channel}' ({reason})", **metadata)
        return WriteResult(False, current, error=detail, conflict=conflict)

    def _publish(
        self, intent: Intent, sender: str, event: BaseModel, *, summary: str, **metadata: Any
    ) -> None:
        fields = event.model_dump()
        self.ctx.publish(
            intent=intent, sender=sender, content=event.model_dump_json(), summary=summary,
            **metadata, scratchpad_id=self.scratchpad_id,
            **{k: fields[k] for k in ("channel", "version") if k in fields},
        )
