"""The per-problem figures of ``critic_loop``: the thread's loop, and with a panel of critics
which kinds asked for changes — each kind's critique success rate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from pydantic import Field

from critiquelab.pipelines.figure_groups import RevisionFigures
from critiquelab.pipelines.outcomes import Scored
from critiquelab.pipelines.threads import ThreadOutcome


class PanelFigures(RevisionFigures):
    """A panel of critics (``critics`` given): what each kind asked for, against the first version."""

    changes_requested_by: list[str] | None = Field(
        default=None,
        description="Critic kinds that asked for changes in any review, in panel order (with a panel only).",
    )

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """Per critic kind: problems on which it asked for changes, and its critique success rate
        — of the problems whose first version failed and on which it asked for changes, the share
        whose final code passes (absent where it challenged no failing first version)."""
        scored = [r for r in rows
                  if r.figures.changes_requested_by is not None and r.figures.first_passed is not None]
        kinds = dict.fromkeys(kind for r in scored for kind in r.figures.changes_requested_by or [])
        metrics: dict[str, float] = {}
        for kind in kinds:
            asked = [r for r in scored if kind in (r.figures.changes_requested_by or [])]
            challenged = [r for r in asked if not r.figures.first_passed]
            metrics[f"changes_requested.{kind}"] = len(asked)
            if challenged:
                metrics[f"critique_success_rate.{kind}"] = sum(r.passed for r in challenged) / len(challenged)
        return metrics


class CriticLoopOutcome(ThreadOutcome, PanelFigures):  # type: ignore[misc]  # plugin false positive: see critiquelab.pipelines.outcomes
    """Figures of ``critic_loop``."""
