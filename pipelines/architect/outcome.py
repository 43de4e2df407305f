"""The per-problem figures of ``architect``: the plan, the developers' attempts and the
architect's decisions, the review loop, and what each agent cost."""

from __future__ import annotations

from pydantic import Field

from critiquelab.pipelines.agent_counts import AgentCountFigures
from critiquelab.pipelines.figure_groups import RevisionFigures
from critiquelab.pipelines.outcomes import Outcome


class ArchitectOutcome(Outcome, RevisionFigures, AgentCountFigures):
    """Figures of ``architect``."""

    reviews: int = Field(description="Reviews of an integrated solution.")
    first_verdict: str = Field(description="The first review's verdict ('' without a review).")
    final_verdict: str = Field(description="The last review's verdict ('' without a review).")
    changes_requested: bool = Field(description="Whether a review asked for changes or rejected.")
    stop_reason: str = Field(description="Why the team stopped (approved, max_iterations, aborted …).")
    tasks_planned: int = Field(description="Function tasks in the architect's plan.")
    waves: int = Field(description="Waves of tasks the plan runs in.")
    developer_attempts: int = Field(description="Developer outputs (one per delegation).")
    developer_failures: int = Field(description="Of them, not completed.")
    retries: int = Field(description="Tasks the architect gave the same developer again.")
    reassignments: int = Field(description="Tasks the architect gave another developer.")
    aborts: int = Field(description="Times the architect gave up on a task.")
    sessions: int = Field(description="Sessions (the orchestrator's delegations and reviews).")
    messages: int = Field(description="Messages on the problem's thread.")
    unparsed_steps: int = Field(description="Role calls whose reply could not be parsed.")
