"""compare's failure attribution: per pipeline, where each problem ended and how often.

Each run's problems are attributed by its pipeline's registered outcome model
(:meth:`critiquelab.pipelines.outcomes.Outcome.attributions`, in the places
:mod:`critiquelab.pipelines.attribution` defines): a pipeline that drafts and revises by its first and final
versions' hidden-test results and what its reviews asked for, one that chooses among candidates by every
candidate's. The per-problem class is the ``attribution`` column of compare's ``problems.csv`` (with the run
id, so ``critiquelab view`` opens each problem), counts and shares per pipeline are ``attribution.csv``,
a section of ``summary.md`` and ``report.html`` (each problem linked to its transcript) and
metrics ``attribution.<label>.<end>`` (and ``…_share``) on the run the comparison is logged to.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from critiquelab.eval.results import results_from_table
from critiquelab.experiments.compare.compared_run import ComparedRun
from critiquelab.pipelines.attribution import MEANINGS

COLUMN = "attribution"
PROBLEM_COLUMNS = ("pipeline", "seed", "run_id", "task_id", "passed", COLUMN)


@dataclass
class AttributionSection:
    """What the attribution adds to a comparison: its Markdown section and its MLflow metrics."""

    markdown: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


def attribute_problems(problems: Any, runs: Sequence[ComparedRun]) -> dict[str, tuple[str, ...]]:
    """Set ``problems[COLUMN]`` (None where a problem is not attributable) from each run's
    registered outcome model; returns, per label attributed, the places its problems can end."""
    from critiquelab.pipelines.registry import is_pipeline, outcome_model

    problems[COLUMN] = None
    ends: dict[str, tuple[str, ...]] = {}
    for run in runs:
        if not is_pipeline(run.pipeline) or not outcome_model(run.pipeline).attribution_ends():
            continue
        model = outcome_model(run.pipeline)
        rows = problems.index[problems["run_id"] == run.run_id]
        problems.loc[rows, COLUMN] = model.attributions(results_from_table(problems.loc[rows]))
        ends[run.label] = model.attribution_ends()
    return ends


def attribution_counts(problems: Any, ends: dict[str, tuple[str, ...]]) -> Any:
    """One row per pipeline label and place: ``count`` (problems × seeds), ``share`` of the
    label's attributed problems, and the ``problems`` there (``task_id@seed``)."""
    import pandas as pd

    rows = []
    for label, places in ends.items():
        mine = problems[(problems["pipeline"] == label) & problems[COLUMN].notna()]
        for end in places:
            there = mine[mine[COLUMN] == end]
            rows.append({
                "pipeline": label, "end": end, "count": len(there),
                "share": len(there) / len(mine) if len(mine) else float("nan"),
                "problems": " ".join(f"{task}@{seed}"
                                     for task, seed in zip(there["task_id"], there["seed"], strict=True)),
            })
    return pd.DataFrame(rows, columns=["pipeline", "end", "count", "share", "problems"])


def metric_key(label: str, end: str) -> str:
    """An MLflow metric name for ``label``'s count of ``end`` (characters MLflow refuses become _)."""
    return f"attribution.{re.sub(r'[^A-Za-z0-9_./ -]', '_', label)}.{end}"


def _tables(counts: Any) -> list[tuple[tuple[str, ...], list[str]]]:
    """Labels grouped by the places their pipeline can end (revising vs choosing)."""
    grouped: dict[tuple[str, ...], list[str]] = {}
    for label, rows in counts.groupby("pipeline", sort=False):
        grouped.setdefault(tuple(rows["end"]), []).append(str(label))
    return list(grouped.items())


def _cell(counts: Any, label: str, end: str) -> str:
    row = counts[(counts["pipeline"] == label) & (counts["end"] == end)].iloc[0]
    return f"{row['count']} ({row['share']:.2f})" if row["share"] == row["share"] else "0"


def _markdown(counts: Any) -> str:
    parts = ["", "## Where problems ended", "",
             "Failure attribution per pipeline: problems (× seeds) in each place, and their share of the "
             "pipeline's attributed problems; `problems.csv` names each problem's place "
             "(column `attribution`), `attribution.csv` lists them.", ""]
    for places, labels in _tables(counts):
        parts += ["| pipeline | " + " | ".join(places) + " |", "|---" * (len(places) + 1) + "|"]
        parts += [f"| {label} | " + " | ".join(_cell(counts, label, end) for end in places) + " |"
                  for label in labels]
        parts += [""] + [f"- {end}: {MEANINGS[end]}" for end in places] + [""]
    return "\n".join(parts)


def _html(counts: Any, problems: Any, viewer_url: str | None) -> str:
    from critiquelab.experiments.viewer.server import problem_link

    parts = ['<section id="attribution"><h2>Where problems ended</h2>']
    for places, labels in _tables(counts):
        head = "".join(f'<th title="{html.escape(MEANINGS[e])}">{html.escape(e)}</th>' for e in places)
        body = "".join(
            f"<tr><td>{html.escape(label)}</td>"
            + "".join(f"<td>{html.escape(_cell(counts, label, end))}</td>" for end in places) + "</tr>"
            for label in labels)
        parts.append(f"<table><tr><th>pipeline</th>{head}</tr>{body}</table>")
        parts.append("<ul>" + "".join(f"<li>{html.escape(e)}: {html.escape(MEANINGS[e])}</li>"
                                      for e in places) + "</ul>")
    for label, rows in problems[problems[COLUMN].notna()].groupby("pipeline", sort=False):
        by_end: dict[str, list[str]] = {}
        for row in rows.itertuples():
            text = html.escape(f"{row.task_id}@{row.seed}")
            if viewer_url is not None:  # a study has no viewer to link to: the task ids alone
                link = html.escape(problem_link(viewer_url, str(row.run_id), str(row.task_id)))
                text = f'<a href="{link}">{text}</a>'
            by_end.setdefault(str(getattr(row, COLUMN)), []).append(text)
        listed = "".join(f"<li>{html.escape(end)}: {', '.join(links)}</li>" for end, links in by_end.items())
        parts.append(f"<h3>{html.escape(str(label))}</h3><ul>{listed}</ul>")
    return "".join(parts) + "</section>"


def attribution_section(
    problems: Any, runs: Sequence[ComparedRun], out: Path, files: dict[str, Path], viewer_url: str | None
) -> AttributionSection:
    """Attribute ``problems`` (adding the column), write ``problems.csv`` (always) and, when some
    pipeline attributes its problems, ``attribution.csv`` and the report sections."""
    from critiquelab.eval.report import add_html_section

    ends = attribute_problems(problems, runs)
    files["problems"] = out / "problems.csv"
    problems[[c for c in PROBLEM_COLUMNS if c in problems]].to_csv(files["problems"], index=False)
    if not ends:
        return AttributionSection()
    counts = attribution_counts(problems, ends)
    files["attribution"] = out / "attribution.csv"
    counts.to_csv(files["attribution"], index=False)
    add_html_section(files["html"], _html(counts, problems, viewer_url))
    metrics: dict[str, float] = {}
    for row in counts.itertuples():
        metrics[metric_key(row.pipeline, row.end)] = float(row.count)
        if row.share == row.share:  # a share over no attributed problem is absent, never 0
            metrics[metric_key(row.pipeline, row.end) + "_share"] = float(row.share)
    return AttributionSection(_markdown(counts), metrics)


def log_attribution_metrics(client: Any, run_id: str, metrics: dict[str, float]) -> None:
    """Put the attribution counts and shares on the comparison's MLflow run."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [Metric(key, value, now, 0) for key, value in sorted(metrics.items())]
    for start in range(0, len(batch), 1000):  # MLflow takes at most 1000 metrics per batch
        client.log_batch(run_id, metrics=batch[start:start + 1000])
