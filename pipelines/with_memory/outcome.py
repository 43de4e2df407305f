"""The figures memory adds to any pipeline's outcome when it is on
(:class:`~critiquelab.pipelines.with_memory.task_hook.WithMemory`).

Memory wraps whichever pipeline a spec names, so its figures cannot be in that pipeline's model:
:func:`with_memory_figures` gives the outcome a model that is both — the pipeline's figures and
:class:`MemoryFigures` — validated like any outcome. Their run metrics (``memory.*``, which also
need the memory bank) come from :mod:`critiquelab.pipelines.with_memory.metrics`.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import Field, create_model

from critiquelab.pipelines.outcomes import FigureGroup, Outcome


class MemoryFigures(FigureGroup):
    """What memory did on one task."""

    memory_role_calls: int | None = Field(default=None, description="Role calls that could receive memories.")
    memory_injected_calls: int | None = Field(
        default=None, description="Of them, calls that received at least one."
    )
    memory_first_attempt_injected_calls: int | None = Field(
        default=None,
        description="Of them, first attempts (not a retry or repair after the visible examples failed).",
    )
    memory_demo_calls: int | None = Field(
        default=None, description="Calls given at least one verified demo."
    )
    memory_foreign_calls: int | None = Field(
        default=None,
        description="Calls that received a memory written on another task or about another role.",
    )
    memory_used_calls: int | None = Field(
        default=None, description="Calls whose output used an injected text."
    )
    memory_entries_written: int | None = Field(
        default=None, description="Entries written to the bank after the task."
    )
    memory_skills_promoted: int | None = Field(
        default=None, description="Of them, entries promoted to a skill."
    )
    memory_visible_passed: bool | None = Field(
        default=None,
        description="The final code on the visible examples (absent when the prompt shows none).",
    )


def with_memory_figures(outcome: Outcome, **figures: Any) -> Outcome:
    """``outcome`` with memory's ``figures`` added, as an instance of a model combining the
    pipeline's outcome model with :class:`MemoryFigures` (an undeclared figure is an error)."""
    model = type(outcome)
    combined = create_model(
        f"{model.__name__}WithMemory", __base__=(model, MemoryFigures), __module__=__name__
    )
    return cast(Outcome, combined.model_validate({**dict(outcome), **figures}))
