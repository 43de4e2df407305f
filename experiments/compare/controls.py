"""compare's Controls block: positive controls (``critiquelab.pipelines.controls``) are reported apart from
the pipelines they bound, never as a headline row, a headline pair or a bar of the plots.

A control run is known by its MLflow tag (``critiquelab.control``, set by the runner) and its
label carries the marker ``[control: NAME]`` (:func:`critiquelab.experiments.controls.marked_label`), so it
reads as a control wherever a label is shown. Its rows and every pair that involves it go to
``controls.csv`` / ``control_pairs.csv`` and a Controls section of ``summary.md`` and
``report.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critiquelab.experiments.compare.compared_run import ComparedRun


@dataclass(frozen=True)
class SplitTables:
    """compare's tables with the controls taken out of the headline ones."""

    table: Any  # pandas DataFrame: the headline pipelines
    pairs: Any  # pairs of headline pipelines
    controls: Any  # the controls' rows (empty when no run is a control)
    control_pairs: Any  # every pair with a control in it


def split_controls(table: Any, pairs: Any, runs: Sequence[ComparedRun]) -> SplitTables:
    """``table`` (one row per label) and ``pairs`` (columns ``a``, ``b``) split by whether a label
    is a control's."""
    controls = {run.label for run in runs if run.control}
    is_control = table["pipeline"].isin(controls)
    headline_pairs, control_pairs = pairs, pairs.iloc[0:0]
    if len(pairs):
        with_control = pairs["a"].isin(controls) | pairs["b"].isin(controls)
        headline_pairs, control_pairs = pairs[~with_control], pairs[with_control]
    return SplitTables(
        table[~is_control].reset_index(drop=True), headline_pairs.reset_index(drop=True),
        table[is_control].reset_index(drop=True), control_pairs.reset_index(drop=True),
    )


def controls_section(split: SplitTables, out: Path, files: dict[str, Path]) -> str:
    """Write the controls' tables beside the report and put their section into ``report.html``;
    the Markdown section is returned ('' without a control)."""
    from critiquelab.eval.report import add_html_section, controls_markdown, render_controls_html

    if split.controls.empty:
        return ""
    files["controls"] = out / "controls.csv"
    split.controls.to_csv(files["controls"], index=False)
    files["control_pairs"] = out / "control_pairs.csv"
    split.control_pairs.to_csv(files["control_pairs"], index=False)
    add_html_section(files["html"], render_controls_html(split.controls, split.control_pairs))
    return controls_markdown(split.controls, split.control_pairs)
