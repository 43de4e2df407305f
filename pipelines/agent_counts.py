"""Per-agent counts of one task's thread, from its messages alone: what each agent cost and did.

A pipeline's outcome holds them typed (:class:`AgentCountFigures`) and stores them as flat
figures (``agent.ROLE.FIGURE``, ``agent.ROLE.verdict.VERDICT``), so the runner keeps them in the
per-problem table with everything else (a later viewer reads them there; the table is parquet,
which holds numbers in columns better than nested records).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ConfigDict, Field, model_serializer

from critiquelab.core.config import StrictModel
from critiquelab.pipelines.outcomes import Figures
from critiquelab.runtime.agents import agent_role
from critiquelab.runtime.pool.messages import Message


class AgentCounts(StrictModel):
    """What one agent cost and did on one task (measured: its time may be any float)."""

    model_config = ConfigDict(allow_inf_nan=True)

    calls: int = Field(description="LM requests of its role calls.")
    cached_calls: int = Field(description="Of them, answered from the LM cache.")
    prompt_tokens: int = Field(description="Prompt tokens of its role calls.")
    completion_tokens: int = Field(description="Completion tokens of its role calls.")
    wall_s: float = Field(description="Time in its role calls, in seconds.")
    steps: int = Field(description="Role calls it made.")
    tasks: int = Field(description="Distinct team tasks (team_task ids) its messages answered.")
    verdicts: dict[str, int] = Field(description="How many times it gave each verdict.")


class AgentCountFigures(Figures):
    """Per-agent counts as figures: stored flat, ``agent.ROLE.FIGURE`` and ``agent.ROLE.verdict.V``."""

    agents: dict[str, AgentCounts] = Field(description="By agent role (the name without its thread suffix).")

    @model_serializer(mode="wrap")
    def _flat(self, dump: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        figures = dump(self)
        for agent, row in (figures.pop("agents", None) or {}).items():
            for key, value in row.items():
                if key == "verdicts":
                    figures.update({f"agent.{agent}.verdict.{v}": n for v, n in value.items()})
                else:
                    figures[f"agent.{agent}.{key}"] = value
        return figures


def agent_counts(history: Sequence[Message]) -> dict[str, AgentCounts]:
    """For each agent that made a role call or gave a verdict: ``calls`` and ``cached_calls`` (LM
    requests), ``prompt_tokens``, ``completion_tokens``, ``wall_s`` (time in its role calls),
    ``steps`` (role calls), ``tasks`` (distinct ``team_task`` ids its messages answered) and
    ``verdicts`` (count per verdict it gave)."""
    figures: dict[str, dict[str, Any]] = {}
    tasks: dict[str, set[str]] = {}
    for message in history:
        trace = message.metadata.get("trace")
        verdict = message.metadata.get("verdict")
        if trace is None and verdict is None:
            continue
        agent = agent_role(message.sender)
        row = figures.setdefault(agent, {
            "calls": 0, "cached_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
            "wall_s": 0.0, "steps": 0, "tasks": 0, "verdicts": Counter(),
        })
        if trace is not None:
            usage = trace.get("usage", {})
            for key in ("calls", "cached_calls", "prompt_tokens", "completion_tokens"):
                row[key] += int(usage.get(key, 0))
            row["wall_s"] = round(row["wall_s"] + float(trace.get("latency_s", 0.0)), 4)
            row["steps"] += 1
        if verdict is not None:
            row["verdicts"][str(verdict)] += 1
        if "team_task" in message.metadata:
            tasks.setdefault(agent, set()).add(str(message.metadata["team_task"]))
    return {
        agent: AgentCounts.model_validate(
            {**row, "tasks": len(tasks.get(agent, ())), "verdicts": dict(row["verdicts"])}
        )
        for agent, row in figures.items()
    }
