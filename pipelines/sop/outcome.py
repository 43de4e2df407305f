"""The per-problem figures of ``sop``: the assembly line's versions, QA runs and handoffs, its
first version and acceptance tests judged after the run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from pydantic import Field

from critiquelab.pipelines.figure_groups import GeneratedTestFigures, RevisionFigures, counted_totals
from critiquelab.pipelines.outcomes import FigureGroup, Outcome, Scored


class HandoffCounts(FigureGroup):
    """Handoffs that failed their stage's schema, counted over a run."""

    handoff_rejections: int | None = Field(
        default=None, description="Artifacts a receiver returned to their sender."
    )
    unvalidated_handoffs: int | None = Field(
        default=None, description="Artifacts taken as they were after the retries were used up."
    )

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        return counted_totals(rows)


class SopOutcome(Outcome, RevisionFigures, GeneratedTestFigures, HandoffCounts):
    """Figures of ``sop``."""

    versions: int = Field(description="Versions the engineer wrote.")
    qa_runs: int = Field(description="QA reports.")
    qa_passed: bool = Field(description="Whether the last QA report passed.")
    changes_requested: bool = Field(description="Whether QA failed a version or a reviewer sent one back.")
    handoffs: int = Field(description="Handoffs between stages.")
    handoff_rejections: int = Field(description="Artifacts a receiver returned to their sender.")
    unvalidated_handoffs: int = Field(
        description="Artifacts taken as they were after the retries were used up."
    )
    stop_reason: str = Field(description="Why the line stopped (qa_passed, approved, max_iterations …).")
    messages: int = Field(description="Messages on the problem's thread.")
    unparsed_steps: int = Field(description="Role calls whose reply could not be parsed.")
