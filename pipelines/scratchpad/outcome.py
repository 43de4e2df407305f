"""The per-problem figures of the ``scratchpad`` team: its review loop, what happened on the
scratchpad (updates, conflicts, refused writes, size) and what each agent cost."""

from __future__ import annotations

from pydantic import Field

from critiquelab.pipelines.agent_counts import AgentCountFigures
from critiquelab.pipelines.figure_groups import RevisionFigures
from critiquelab.pipelines.outcomes import Outcome


class ScratchpadOutcome(Outcome, RevisionFigures, AgentCountFigures):
    """Figures of ``scratchpad``."""

    reviews: int = Field(description="Reviews written on the scratchpad.")
    fixes: int = Field(description="Revised versions of the code.")
    first_verdict: str = Field(description="The first review's verdict ('' without a review).")
    final_verdict: str = Field(description="The last review's verdict ('' without a review).")
    changes_requested: bool = Field(description="Whether a review asked for changes.")
    stop_reason: str = Field(description="approved, unparsed_review, max_iterations or no_review.")
    messages: int = Field(description="Messages on the problem's thread.")
    unparsed_steps: int = Field(description="Role calls whose reply could not be parsed.")
    scratchpad_updates: int = Field(description="Writes to a channel.")
    scratchpad_conflicts: int = Field(
        description="Writes made on a stale read, resolved by the channel's policy."
    )
    scratchpad_refused: int = Field(description="Writes refused (rights, size cap).")
    scratchpad_bytes: int = Field(description="The scratchpad's size after the last write.")
