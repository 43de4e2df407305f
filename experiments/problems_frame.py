"""The per-problem rows of a finished experiment as one DataFrame (``ExperimentResult.problems``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from critiquelab.eval.results import TABLE_COLUMNS, ProblemResult, results_table
from critiquelab.experiments.controls import marked_label


class ChildRun(Protocol):
    """What of :class:`critiquelab.experiments.child_steps.ChildRun` the frame reads (the runner imports this
    module, so it is described here, not imported)."""

    pipeline: str
    seed: int
    run_id: str
    results: list[ProblemResult]
    control: str

LEADING = ("pipeline", "seed", "run_id", "task_id")


def problems_frame(children: Sequence[ChildRun]) -> Any:
    """One row per problem of each child run (its per-problem table, ``problems.parquet``), with
    ``pipeline`` set to the run's label (marked for a positive control), ``seed`` and ``run_id``;
    the columns are documented on :attr:`critiquelab.experiments.runner.ExperimentResult.problems`."""
    import pandas as pd

    frames = []
    for child in children:
        frame = results_table(child.results)
        frame["pipeline"] = marked_label(child.pipeline, child.control)
        frame["seed"], frame["run_id"] = child.seed, child.run_id
        frames.append(frame)
    if not frames:
        columns = [*LEADING, *(c for c in TABLE_COLUMNS if c not in LEADING), "usage_by_role"]
        return pd.DataFrame(columns=columns)
    merged = pd.concat(frames, ignore_index=True)
    return merged[[*LEADING, *(c for c in merged.columns if c not in LEADING)]]
