"""Render a pipeline comparison: two plots, a Markdown summary and a self-contained HTML page.

Rendering only: the numbers come from :mod:`critiquelab.eval.statistics`. The HTML embeds its images as
base64 so it can be mailed or attached to an MLflow run and still open on its own. A metric that
does not apply to a pipeline (missing, NaN) is shown as "–" and draws nothing.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from critiquelab.eval.plots import saved_figure

# Columns of the Markdown table (the HTML shows every column); optional ones appear when present.
SUMMARY_COLUMNS = (
    "pipeline", "seeds", "problems", "pass@1", "95% CI", "seed_sd", "tokens/problem", "prompt_tokens/problem",
    "completion_tokens/problem", "messages/problem", "iterations", "pass@1_per_1k_tokens",
)
BEHAVIOUR_COLUMNS = (
    "first_pass@1", "critique_success_rate", "harmful_revision_rate", "consensus_rate",
    "consensus_correctness", "final_in_majority_rate", "flips_correct_to_wrong", "flips_wrong_to_correct",
    "agreement_initial", "agreement_final", "vote_agreement", "generated_test_accuracy",
    "samples_pass@1", "samples_pass@5", "samples_pass@10", "samples_pass@20",
)
PAIR_COLUMNS = ("a", "b", "pairs", "pass@1_a", "pass@1_b", "difference", "95% CI", "only_a", "only_b",
                "mcnemar_p")
# The Memory section's columns, when the runs logged them (``memory.*`` metrics, prefix removed).
MEMORY_COLUMNS = ("pipeline", "seed", "reuse_rate", "used_rate", "recall_precision_at_k", "recall_hit_at_k",
                  "entries", "redundancy", "fail_rate_first_block", "fail_rate_last_block",
                  "injected_first_attempts", "demo_calls")
PASS_PLOT = "pass_at_1.png"
COST_PLOT = "pass_vs_tokens.png"


@dataclass(frozen=True)
class ReportContext:
    """What the text around the tables says: which runs, how the statistics were made."""

    title: str
    runs: Sequence[tuple[str, str, str, str]]  # (label, seed, run id, parent) per child run
    bootstrap_seed: int
    bootstrap_resamples: int
    confidence: float
    notices: Sequence[str] = ()  # what was chosen or left out (duplicate or unfinished runs)
    # (text, URL) per problem two pipelines disagree on: its side-by-side view (critiquelab view)
    discordant: Sequence[tuple[str, str]] = ()


def _format(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        if value.is_integer() and abs(value) >= 10:
            return f"{value:.0f}"
        return f"{value:.4g}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def _with_ci(frame: pd.DataFrame, low: str = "ci_low", high: str = "ci_high") -> pd.DataFrame:
    frame = frame.copy()
    bounds = zip(frame[low], frame[high], strict=True)
    frame["95% CI"] = [f"[{_format(lo)}, {_format(hi)}]" for lo, hi in bounds]
    return frame


def _present(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The requested columns that exist and hold at least one value."""
    return [c for c in columns if c in frame and not frame[c].isna().all()]


def markdown_table(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table (pandas' ``to_markdown`` needs ``tabulate``)."""
    columns = list(columns or frame.columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for _, row in frame[columns].iterrows():
        lines.append("| " + " | ".join(_format(row[c]).replace("|", "\\|") for c in columns) + " |")
    return "\n".join(lines)


def _error_bars(table: pd.DataFrame) -> np.ndarray:
    """Lengths of the CI bars below and above pass@1: non-negative by construction (matplotlib
    rejects a negative one, and a bound a rounding error past the estimate is no bar at all); an
    undefined CI draws no bar."""
    estimate = table["pass@1"].to_numpy(dtype=float)
    below = estimate - table["ci_low"].to_numpy(dtype=float)
    above = table["ci_high"].to_numpy(dtype=float) - estimate
    bars: np.ndarray = np.nan_to_num(np.maximum(np.vstack([below, above]), 0.0), nan=0.0)
    return bars


def plot_pass_at_1(table: pd.DataFrame, path: Path) -> Path:
    """pass@1 per pipeline with its Wilson interval as error bars."""
    with saved_figure(path, figsize=(max(4.0, 1.2 * len(table) + 2), 3.6)) as ax:
        x = range(len(table))
        ax.bar(x, table["pass@1"], color="#4c72b0", alpha=0.8)
        ax.errorbar(x, table["pass@1"], yerr=_error_bars(table), fmt="none", ecolor="black", capsize=5)
        ax.set_xticks(list(x), list(table["pipeline"]), rotation=20, ha="right")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("pass@1 (95% Wilson CI)")
        ax.set_title("pass@1 per pipeline")
    return path


def plot_pass_vs_tokens(table: pd.DataFrame, path: Path) -> Path:
    """pass@1 against mean tokens per problem: the cost/quality frontier, one labelled point each."""
    with saved_figure(path, figsize=(5.5, 4.0)) as ax:
        ax.errorbar(table["tokens/problem"], table["pass@1"], yerr=_error_bars(table), fmt="o", capsize=4)
        for _, row in table.iterrows():
            ax.annotate(str(row["pipeline"]), (row["tokens/problem"], row["pass@1"]),
                        textcoords="offset points", xytext=(6, 6))
        ax.set_xlabel("tokens per problem (prompt + completion)")
        ax.set_ylabel("pass@1")
        ax.set_ylim(0, 1.05)
        ax.set_xlim(left=0, right=max(1.0, float(table["tokens/problem"].max()) * 1.25))
        ax.set_title("pass@1 vs cost")
    return path


def _methods(context: ReportContext, seeded: bool) -> list[str]:
    level = f"{context.confidence:.0%}"
    notes = [
        f"pass@1 CI: Wilson score interval ({level}) on passed/attempts.",
        "pass@1_per_1k_tokens = pass@1 / (tokens per problem / 1000): problems solved per 1k tokens.",
        "Pairwise: units are the problems both pipelines ran, paired by task and seed; exact McNemar "
        "test on the discordant pairs (only_a = A passes and B fails); difference = pass@1(A) − pass@1(B) "
        f"with a paired percentile bootstrap {level} CI ({context.bootstrap_resamples} resamples, "
        f"seed {context.bootstrap_seed}). P-values are not corrected for multiple comparisons.",
    ]
    if seeded:
        notes.append(
            "Several seeds: every (problem, seed) is one attempt; pass@1 is pooled over seeds "
            "(seed_sd = spread of per-seed pass@1). Attempts on the same problem are correlated, so "
            "CIs and p-values are somewhat optimistic."
        )
    return notes


def render_markdown(context: ReportContext, table: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """The summary printed in the terminal and saved as ``summary.md``."""
    summary = _with_ci(table)
    parts = [f"# {context.title}", ""]
    if context.notices:
        parts += [f"> note: {notice}" for notice in context.notices] + [""]
    parts += [markdown_table(summary, _present(summary, SUMMARY_COLUMNS)), ""]
    behaviour = _present(summary, BEHAVIOUR_COLUMNS)
    if behaviour:  # critique and debate metrics, for the pipelines that have them
        rows = summary[summary[behaviour].notna().any(axis=1)]
        parts += ["## Critique and consensus", "", markdown_table(rows, ["pipeline", *behaviour]), ""]
    if len(pairs):
        parts += ["## Paired comparisons", "", markdown_table(_with_ci(pairs), PAIR_COLUMNS), ""]
    else:
        parts += ["Only one pipeline: no paired comparison.", ""]
    parts += ["## Method", ""] + [f"- {note}" for note in _methods(context, (table["seeds"] > 1).any())]
    parts += ["", "## Runs", ""] + [f"- {label} seed {seed}: `{run}` (parent `{parent}`)"
                                    for label, seed, run, parent in context.runs]
    return "\n".join(parts) + "\n"


def _image(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 6px;
text-align:right}th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}
img{max-width:48%;margin-right:1%}"""


def frame_html(frame: pd.DataFrame) -> str:
    """A table without its empty columns; pandas escapes every cell."""
    shown = frame.dropna(axis=1, how="all")
    table: str = shown.to_html(index=False, na_rep="–", float_format=lambda v: _format(float(v)), border=0)
    return table


def render_html(
    context: ReportContext, table: pd.DataFrame, pairs: pd.DataFrame, images: Sequence[Path]
) -> str:
    """A single HTML file: every column of both tables, both plots inline, the method notes."""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in _methods(context, (table["seeds"] > 1).any()))
    runs = "".join(f"<li>{html.escape(str(label))} seed {seed}: <code>{run}</code> (parent <code>{parent}"
                   "</code>)</li>" for label, seed, run, parent in context.runs)
    body = [
        f"<h1>{html.escape(context.title)}</h1>",
        *(f"<p><b>Note:</b> {html.escape(notice)}</p>" for notice in context.notices),
        "<h2>Pipelines</h2>", frame_html(table),
        "<div>" + "".join(_image(p, p.stem) for p in images) + "</div>",
        "<h2>Paired comparisons</h2>",
        frame_html(pairs) if len(pairs) else "<p>Only one pipeline: no paired comparison.</p>",
        f"<h2>Method</h2><ul>{notes}</ul>", f"<h2>Runs</h2><ul>{runs}</ul>",
    ]
    if context.discordant:
        links = "".join(f'<li><a class="discordant" href="{html.escape(url)}">{html.escape(text)}</a></li>'
                        for text, url in context.discordant)
        body.insert(-2, "<h2>Discordant problems</h2><p>Each opens both transcripts side by side in "
                    f"<code>critiquelab view</code> (start it first).</p><ul>{links}</ul>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(context.title)}</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>\n")


CONTROLS_SECTION_ID = "controls"
CONTROLS_NOTE = (
    "Positive controls see the hidden tests (oracle_feedback: the reviser reads what they say about "
    "the code it revises): each measures a ceiling of its pipeline, not a method, so it is never a "
    "row of the table above. Compare a control with its own arm to read how far that arm is from it."
)


def controls_markdown(controls: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """The Controls block of ``summary.md``: the controls' rows and their paired comparisons."""
    summary = _with_ci(controls)
    columns = _present(summary, SUMMARY_COLUMNS) + _present(summary, BEHAVIOUR_COLUMNS)
    parts = ["", "## Controls", "", CONTROLS_NOTE, "", markdown_table(summary, columns), ""]
    if len(pairs):
        parts += ["Paired with the other pipelines:", "", markdown_table(_with_ci(pairs), PAIR_COLUMNS), ""]
    return "\n".join(parts)


def render_controls_html(controls: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """The Controls block as a ``report.html`` section (see :func:`add_html_section`)."""
    parts = [f'<section id="{CONTROLS_SECTION_ID}"><h2>Controls</h2><p>{html.escape(CONTROLS_NOTE)}</p>',
             frame_html(controls)]
    if len(pairs):
        parts += ["<p>Paired with the other pipelines:</p>", frame_html(pairs)]
    return "".join(parts) + "</section>"


MEMORY_SECTION_ID = "memory"
_METHOD_HEADING = "<h2>Method</h2>"


def render_memory_html(
    memory: pd.DataFrame, curves: pd.DataFrame, plot: Path | None, slopes: pd.DataFrame | None = None
) -> str:
    """The Memory section of ``summary.md`` as HTML: the runs' memory metrics, the learning-curve
    reading (``critiquelab.eval.learning_curve.curve_summary``), the plot inline and the slope tests
    (``critiquelab.eval.learning_slope``)."""
    parts = [f'<section id="{MEMORY_SECTION_ID}"><h2>Memory</h2>']
    if len(memory):
        parts.append(frame_html(memory[[c for c in MEMORY_COLUMNS if c in memory]]))
    parts.append("<p>Learning curves: pass@1 on the first and last block of problems in run order.</p>")
    if len(curves):
        parts.append(frame_html(curves))
    if plot is not None and plot.is_file():
        parts.append(f"<div>{_image(plot, plot.stem)}</div>")
    if slopes is not None and len(slopes):
        parts.append("<p>Slope test: late half minus early half of the run order, against a reference "
                     "without memory over the same orderings (difference in differences; p over "
                     "orderings by t-test, over positions by permutation).</p>")
        parts.append(frame_html(slopes))
    return "".join(parts) + "</section>"


def add_html_section(html_path: Path, section: str) -> None:
    """Put a section into a ``report.html`` that :func:`write_report` wrote, before the method
    notes (for what the comparison finds only after the report is written)."""
    page = html_path.read_text()
    at = page.find(_METHOD_HEADING)
    at = at if at >= 0 else page.rindex("</body>")
    html_path.write_text(page[:at] + section + page[at:])


def add_memory_section(
    html_path: Path, memory: pd.DataFrame, curves: pd.DataFrame, plot: Path | None,
    slopes: pd.DataFrame | None = None,
) -> None:
    """Put the Memory section into a ``report.html`` (see :func:`add_html_section`)."""
    add_html_section(html_path, render_memory_html(memory, curves, plot, slopes))


def write_report(
    context: ReportContext, table: pd.DataFrame, pairs: pd.DataFrame, out: Path
) -> tuple[dict[str, Path], str]:
    """Write plots, ``report.html``, ``summary.md`` and the two tables as CSV into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "pass_plot": plot_pass_at_1(table, out / PASS_PLOT),
        "cost_plot": plot_pass_vs_tokens(table, out / COST_PLOT),
    }
    markdown = render_markdown(context, table, pairs)
    files["markdown"] = out / "summary.md"
    files["markdown"].write_text(markdown)
    files["html"] = out / "report.html"
    files["html"].write_text(render_html(context, table, pairs, [files["pass_plot"], files["cost_plot"]]))
    files["table"] = out / "pipelines.csv"
    table.to_csv(files["table"], index=False)
    files["pairs"] = out / "pairwise.csv"
    pairs.to_csv(files["pairs"], index=False)
    return files, markdown
