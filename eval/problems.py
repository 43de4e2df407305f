"""The unit of work: one HumanEval-style problem."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Problem(BaseModel):
    """A programming problem in HumanEval's shape (other dataset formats are turned into it by
    ``critiquelab.eval.formats``).

    ``prompt`` is what the model sees. ``test`` and ``canonical_solution`` are hidden: they
    are used for scoring only and must never reach a prompt.
    """

    task_id: str = Field(description="Unique id, e.g. 'HumanEval/0'.")
    prompt: str = Field(description="Function signature with docstring (and often imports/helpers).")
    entry_point: str = Field(description="Name of the function the tests call.")
    test: str = Field(description="Hidden test code defining `check(candidate)`.")
    canonical_solution: str | None = Field(
        default=None,
        description="Reference solution, if the dataset has one (never shown to a model): a body "
        "completing the prompt (HumanEval) or a whole program (MBPP); either way "
        "`assemble_program(prompt, canonical_solution, entry_point)` builds the reference.",
    )
