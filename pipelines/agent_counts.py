"""Per-agent counts of one task's thread, from its messages alone: what each agent cost and did.

A pipeline returns them in its metrics as flat numbers (:func:`flat_agent_counts`:
``agent.ROLE.FIGURE``, ``agent.ROLE.verdict.VERDICT``), so the runner keeps them in the
per-problem table with everything else (a later viewer reads them there; the table is parquet,
which holds numbers in columns better than nested records).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pipelines.pool.messages import Message


def agent_role(sender: str) -> str:
    """An agent's name without its thread suffix (``coder@1a2b…`` → ``coder``)."""
    return sender.split("@", 1)[0]


def agent_counts(history: Sequence[Message]) -> dict[str, dict[str, Any]]:
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
    for agent, row in figures.items():
        row["tasks"] = len(tasks.get(agent, ()))
        row["verdicts"] = dict(row["verdicts"])
    return figures


def flat_agent_counts(history: Sequence[Message]) -> dict[str, float | int]:
    """:func:`agent_counts` as ``agent.ROLE.FIGURE`` keys (verdicts: ``agent.ROLE.verdict.V``)."""
    flat: dict[str, float | int] = {}
    for agent, row in agent_counts(history).items():
        for key, value in row.items():
            if key == "verdicts":
                flat.update({f"agent.{agent}.verdict.{v}": n for v, n in value.items()})
            else:
                flat[f"agent.{agent}.{key}"] = value
    return flat
