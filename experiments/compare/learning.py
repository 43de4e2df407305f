"""compare's learning section: the learning-curve plot, each memory run's metrics, and the slope
test of every pipeline with memory against a reference without it.

The reference of a pipeline with memory is the run of the same registered pipeline without memory
when the comparison holds one (reflexion+memory against reflexion: the same retries, so the same
order effect), else the baseline; ``critiquelab.eval.learning_slope`` says what is tested and how.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from critiquelab.eval.learning_curve import (
    LEARNING_PLOT,
    curve_summary,
    learning_curves,
    plot_learning_curves,
)
from critiquelab.eval.learning_slope import slope_tests
from critiquelab.eval.report import MEMORY_COLUMNS, add_memory_section
from critiquelab.experiments.compare.compared_run import ComparedRun

SLOPE_FILE = "learning_slope.csv"


def _memory_metrics(client: Any, runs: Sequence[ComparedRun]) -> pd.DataFrame:
    """The ``memory.*`` metrics each run logged (pipelines with memory), one row per run."""
    rows = []
    for run in runs:
        logged = client.get_run(run.run_id).data.metrics
        values = {k.removeprefix("memory."): v for k, v in logged.items() if k.startswith("memory.")}
        if values:
            rows.append({"pipeline": run.label, "seed": run.seed, **values})
    return pd.DataFrame(rows)


def _cell(value: Any) -> str:
    """A metric a run did not log (no probe, no memory call) reads "–", never nan."""
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def references(runs: Sequence[ComparedRun], with_memory: set[str]) -> list[tuple[str, str]]:
    """(label with memory, its reference's label) for each label with memory that has one."""
    plain: dict[str, str] = {}
    for run in runs:
        if run.label not in with_memory:
            plain.setdefault(run.label, run.pipeline)
    baseline = next((label for label, name in plain.items() if name == "baseline"), None)
    pipeline_of = {run.label: run.pipeline for run in runs}
    pairs = []
    for label in sorted(with_memory):
        same = next((other for other, name in plain.items() if name == pipeline_of.get(label)), None)
        reference = same or baseline
        if reference is not None:
            pairs.append((label, reference))
    return pairs


def _slope_lines(slopes: pd.DataFrame) -> list[str]:
    lines = ["", "Slope test: each pipeline with memory, late half minus early half of its run order, "
             "against its reference without memory over the same orderings and problems (the "
             "reference's own change is the order effect). p over orderings: one-sample t-test of "
             "the per-ordering differences (few orderings, little power); p over positions: "
             "permutation test of the pipeline-minus-reference outcome, late half against early half, "
             "problem × ordering positions pooled.",
             "", "| pipeline | reference | orderings | problems per half | late − early | reference's "
             "late − early | difference | per ordering | p (orderings, t-test) | p (positions, "
             "permutation) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in slopes.itertuples(index=False):
        each = ", ".join(f"{d:+.3f}" for d in row.per_ordering)
        lines.append(f"| {row.pipeline} | {row.reference} | {row.orderings} | {row.half} | {row.change:+.3f} "
                     f"| {row.reference_change:+.3f} | {row.difference:+.3f} | {each} "
                     f"| {_cell(row.p_orderings)} | {_cell(row.p_positions)} |")
    return lines


def learning_section(
    client: Any, runs: Sequence[ComparedRun], problems: pd.DataFrame, out: Path, files: dict[str, Path], *,
    seed: int, n_resamples: int,
) -> str:
    """The learning-curve plot (always) and, when some runs had memory, their memory metrics
    (``memory.csv``), the slope tests (``learning_slope.csv``, seeded by ``seed``), a Markdown
    section with these readings (returned) and the same section in ``report.html``."""
    curves = learning_curves(problems)
    files["learning_curve"] = plot_learning_curves(curves, out / LEARNING_PLOT)
    memory = _memory_metrics(client, runs)
    if memory.empty:
        return ""
    files["memory"] = out / "memory.csv"
    memory.to_csv(files["memory"], index=False)
    shown = [c for c in MEMORY_COLUMNS if c in memory]
    lines = ["", "## Memory", "", "| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
    for row in memory[shown].itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    summary = curve_summary(curves)
    slopes = slope_tests(problems, references(runs, set(memory["pipeline"])), seed=seed,
                         n_resamples=n_resamples)
    files["learning_slope"] = out / SLOPE_FILE
    slopes.to_csv(files["learning_slope"], index=False)
    add_memory_section(files["html"], memory, summary, files["learning_curve"], slopes)
    lines += ["", f"Learning curves ({LEARNING_PLOT}): pass@1 on the first and last block of problems "
              "in run order.",
              "", "| pipeline | problems | block | first block | last block |", "|---|---|---|---|---|"]
    for row in summary.itertuples(index=False):
        lines.append(f"| {row.pipeline} | {row.problems} | {row.block} | {row[3]:.3f} | {row[4]:.3f} |")
    if len(slopes):
        lines += _slope_lines(slopes)
    return "\n".join(lines) + "\n"
