"""The per-problem figures of ``role_play``: the conversation, the failure mode that ended it
(CAMEL's role flipping, repeated instructions, turns without progress), its first version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from pydantic import Field

from critiquelab.pipelines.figure_groups import RevisionFigures, counted_totals
from critiquelab.pipelines.outcomes import FigureGroup, Outcome, Scored


class FailureModeCounts(FigureGroup):
    """Conversations ended by a failure mode, counted over a run."""

    role_flips: int | None = Field(default=None, description="1 if a role flip ended the conversation.")
    repeated_instructions: int | None = Field(
        default=None, description="1 if a repeated instruction ended the conversation."
    )
    no_progress_turns: int | None = Field(default=None, description="1 if a turn without progress ended it.")

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        return counted_totals(rows)


class RolePlayOutcome(Outcome, RevisionFigures, FailureModeCounts):
    """Figures of ``role_play``."""

    turns: int = Field(description="Answers the assistant gave.")
    stop_reason: str = Field(description="done, max_turns, role_flip, repeated_instruction, no_progress …")
    role_flips: int = Field(description="1 if a role flip ended the conversation.")
    repeated_instructions: int = Field(description="1 if a repeated instruction ended the conversation.")
    no_progress_turns: int = Field(description="1 if a turn without progress ended it.")
    messages: int = Field(description="Messages on the problem's thread.")
    unparsed_steps: int = Field(description="Role calls whose reply could not be parsed.")
