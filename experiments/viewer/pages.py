"""The viewer's pages as HTML strings, linked by relative paths so the same pages work served
and written to disk: ``index.html``, ``runs/<run>.html``, ``problems/<run>/<slug>.html``,
``pairs/<run a>/<run b>/<slug>.html``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from html import escape
from importlib import resources

from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.viewer.data import RunInfo, ViewerData
from critiquelab.experiments.viewer.problem_page import problem_sections

REFRESH_S = 5  # how often a page of a run in progress reloads itself


def slug(task_id: str) -> str:
    """A file name for a task id (``HumanEval/0`` -> ``HumanEval_0-<hash>``): readable, unique,
    and short enough for any file system (a name has at most 255 bytes; a dataset's task ids
    have no length limit), the digest of the whole id keeping two long ids that share a start apart."""
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', task_id)[:80]}-{digest}"


def _asset(name: str) -> str:
    return resources.files("critiquelab.experiments.viewer").joinpath("static", name).read_text()


def layout(title: str, body: str, depth: int, *, refresh: bool = False) -> str:
    """A whole page; styles and script inline, so a page written to disk needs nothing else."""
    up = "../" * depth
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{meta}<title>{escape(title)}</title>"
        f"<style>{_asset('viewer.css')}</style></head><body>"
        f'<nav><a href="{up}index.html">critiquelab view</a></nav><h1>{escape(title)}</h1>{body}'
        f"<script>{_asset('viewer.js')}</script></body></html>\n"
    )


def _metric(run: RunInfo, name: str, digits: int = 3) -> str:
    value = run.metrics.get(name)
    return "–" if value is None else f"{value:.{digits}f}"


def index_page(runs: Sequence[RunInfo]) -> str:
    """Experiments → parent runs → pipeline runs, filterable by pipeline."""
    children: dict[str, list[RunInfo]] = {}
    for run in runs:
        if run.label:
            children.setdefault(run.parent_id, []).append(run)
    labels = sorted({r.label for r in runs if r.label})
    options = "".join(f'<option value="{escape(label)}">{escape(label)}</option>' for label in labels)
    sections = []
    for run in runs:
        if run.label or run.run_id not in children:
            continue
        rows = "".join(
            f'<tr data-pipeline="{escape(c.label)}"><td><a href="runs/{escape(c.run_id)}.html">'
            f"{escape(c.label)}</a></td><td>{escape(c.seed)}</td><td>{escape(c.status)}</td>"
            f"<td>{_metric(c, 'pass_at_1')}</td><td>{_metric(c, 'problems', 0)}</td>"
            f"<td>{_metric(c, 'tokens_per_problem', 0)}</td><td><code>{escape(c.run_id)}</code></td></tr>"
            for c in sorted(children[run.run_id], key=lambda c: (c.label, c.seed))
        )
        sections.append(
            f"<h2>{escape(run.experiment)} · {escape(run.name)} <small>({escape(run.status)}, "
            f"<code>{escape(run.run_id)}</code>)</small></h2><table class='runs'><tr><th>pipeline</th>"
            "<th>seed</th><th>status</th><th>pass@1</th><th>problems</th><th>tokens/problem</th>"
            f"<th>run</th></tr>{rows}</table>"
        )
    body = (f'<p>Pipeline <select id="pipeline-filter"><option value="">all</option>{options}</select></p>'
            + ("".join(sections) or "<p>No runs in this data directory yet.</p>"))
    return layout("Runs", body, 0, refresh=any(r.running for r in runs))


def run_page(run: RunInfo, problems: Sequence[ProblemResult]) -> str:
    """A pipeline run's problems, filterable by status and failure reason, searchable by task id."""
    statuses = sorted({p.status for p in problems})
    reasons = sorted({p.reason for p in problems if p.reason})

    def options(values: Sequence[str]) -> str:
        return "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)

    rows = "".join(
        f'<tr data-status="{escape(p.status)}" data-reason="{escape(p.reason)}" '
        f'data-task="{escape(p.task_id)}">'
        f'<td><a href="../problems/{escape(run.run_id)}/{slug(p.task_id)}.html">{escape(p.task_id)}</a></td>'
        f'<td class="status-{escape(p.status)}">{escape(p.status)}</td><td>{escape(p.reason)}</td>'
        f"<td>{p.total_tokens:,}</td><td>{p.lm_calls}</td><td>{p.iterations}</td><td>{p.latency_s:.1f}</td></tr>"
        for p in problems
    )
    passed = sum(p.passed for p in problems)
    body = (
        f"<p>{escape(run.label)} seed {escape(run.seed)} · {escape(run.status)} · "
        f"{passed}/{len(problems)} passed"
        f" · <code>{escape(run.run_id)}</code></p>"
        f'<p>Status <select id="status-filter"><option value="">all</option>{options(statuses)}</select> '
        f'Reason <select id="reason-filter"><option value="">all</option>{options(reasons)}</select> '
        'Task <input id="task-search" placeholder="task id"> <span id="shown"></span></p>'
        '<table class="problems"><tr><th>task</th><th>status</th><th>reason</th><th>tokens</th>'
        f"<th>LM calls</th><th>iterations</th><th>seconds</th></tr>{rows}</table>"
    )
    return layout(f"{run.experiment} · {run.label} seed {run.seed}", body, 1, refresh=run.running)


def problem_page(data: ViewerData, run: RunInfo, task_id: str) -> str:
    problem, messages = data.problem(run.run_id, task_id)
    back = f"{escape(run.label)} seed {escape(run.seed)}"
    body = (f'<p><a href="../../runs/{escape(run.run_id)}.html">{back}</a>'
            f"</p>{problem_sections(problem, messages, run.pipeline)}")
    return layout(f"{task_id} · {run.label}", body, 2, refresh=run.running)


def pair_page(data: ViewerData, runs: tuple[RunInfo, RunInfo], task_id: str) -> str:
    """The same problem under two pipelines, side by side."""
    columns = []
    for run in runs:
        problem, messages = data.problem(run.run_id, task_id)
        columns.append(
            f'<div class="column"><h2><a href="../../../problems/{escape(run.run_id)}/{slug(task_id)}.html">'
            f"{escape(run.label)} seed {escape(run.seed)}</a></h2>"
            f"{problem_sections(problem, messages, run.pipeline)}</div>"
        )
    body = f'<div class="pair">{"".join(columns)}</div>'
    return layout(f"{task_id}: {runs[0].label} vs {runs[1].label}", body, 3,
                  refresh=any(r.running for r in runs))
