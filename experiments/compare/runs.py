"""Compare pipelines across MLflow runs: "debate or single critic?" as a table, tests and plots.

From a notebook::

    from critiquelab.experiments.compare.runs import compare_runs
    result = compare_runs("<parent run id>")        # every child run (pipeline × seed) of it
    result = compare_runs(["<child id>", "<child id>"])  # explicit runs, possibly across parents
    result.table, result.pairs                      # pandas DataFrames
    print(result.markdown)                          # also in result.out_dir / "summary.md"

The report is written to ``out`` (default ``<data dir>/reports/<parent id>`` or
``reports/cmp-<hash of the run ids>``) and logged to MLflow: under ``comparison/`` of the parent
run when one parent run was given, else to a new top-level run tagged
``critiquelab.comparison=true`` in the first run's experiment. A new run rather than one of the
parents because explicit ids may span parents (or be a subset of one), and writing a partial
comparison into a parent would misdescribe that parent.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.eval.result_schema import upgrade_table
from critiquelab.eval.summary import FigureMetrics
from critiquelab.experiments.compare.attribution import attribution_section, log_attribution_metrics
from critiquelab.experiments.compare.compared_run import ComparedRun
from critiquelab.experiments.compare.controls import controls_section, split_controls
from critiquelab.experiments.compare.learning import learning_section
from critiquelab.experiments.compare.model_cost import model_cost_section
from critiquelab.experiments.controls import control_of_run, marked_label
from critiquelab.experiments.paths import check_writable_dir
from critiquelab.experiments.paths import data_dir as default_data_dir
from critiquelab.experiments.rescore.pairs import lost_passes_section
from critiquelab.experiments.tracking.compare_provenance import provenance_notices
from critiquelab.experiments.tracking.local_store import require_runs
from critiquelab.experiments.tracking.store import (
    CHILD_TAG,
    PARENT_TAG,
    WARNINGS_TAG,
    ServiceClient,
    child_key,
    most_complete,
    tracking_uri,
)

COMPARISON_TAG = "critiquelab.comparison"
ARTIFACT_PATH = "comparison"


@dataclass
class ComparisonResult:
    """Everything a comparison produced; the files are also MLflow artifacts of ``logged_run_id``."""

    table: Any  # pandas DataFrame: one row per pipeline label
    pairs: Any  # pandas DataFrame: one row per pair of pipelines
    problems: Any  # pandas DataFrame: the per-problem rows the statistics were computed from
    markdown: str
    out_dir: Path
    files: dict[str, Path] = field(default_factory=dict)
    runs: list[ComparedRun] = field(default_factory=list)
    logged_run_id: str | None = None
    bootstrap_seed: int = 0
    notices: list[str] = field(default_factory=list)  # one line each: what was chosen or left out
    controls: Any = None  # pandas DataFrame: the positive controls' rows, apart from ``table``
    attribution_metrics: Any = None  # what the attribution section logs on the comparison's run

    def _repr_markdown_(self) -> str:  # Jupyter shows the summary
        return self.markdown


def open_client(home: Path, tracking: str | None, wanted: str) -> Any:
    """An MLflow client on the store ``wanted`` is read from (a missing local store is bad
    input)."""
    # Per-file download progress bars are noise in a terminal report.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(home, tracking)
    require_runs(uri, wanted)
    return ServiceClient(MlflowClient(uri), uri)


def _get_run(client: Any, run_id: str) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException as exc:
        raise UserError(f"unknown run id '{run_id}' in {client.tracking_uri}") from exc


def _as_compared(run: Any) -> ComparedRun:
    params, control = run.data.params, control_of_run(run.data.tags)
    return ComparedRun(
        run.info.run_id, run.data.tags.get(PARENT_TAG, ""), run.info.experiment_id,
        marked_label(params["pipeline.label"], control), int(params.get("seed", 0)),
        params.get("pipeline", ""), control,
        tuple(line for line in run.data.tags.get(WARNINGS_TAG, "").splitlines() if line.strip()),
    )


def _parent_children(client: Any, parent: Any, notices: list[str]) -> list[Any]:
    """A parent's finished pipeline runs, one per pipeline × seed.

    Data directories written before resume reused child runs can hold two runs of one pipeline
    × seed: the most complete is taken and a notice says so. Pipelines with no finished run
    (an interrupted experiment) are named in a notice, never silently missing.
    """
    parent_id = parent.info.run_id
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`{PARENT_TAG}` = '{parent_id}'",
        max_results=10000,
    )
    by_key: dict[str, list[Any]] = {}
    for child in children:
        if CHILD_TAG in child.data.tags or "pipeline.label" in child.data.params:
            by_key.setdefault(child_key(child), []).append(child)
    chosen = []
    for key, runs in sorted(by_key.items()):
        finished = [r for r in runs if r.info.status == "FINISHED" and "pipeline.label" in r.data.params]
        if not finished:
            notices.append(f"{parent_id}: {key} has no finished run ({runs[0].info.status}); left out")
            continue
        best = most_complete(finished)
        if len(finished) > 1:
            problems = int(best.data.metrics.get("problems", 0))
            notices.append(
                f"{parent_id}: {len(finished)} runs of {key}; using {best.info.run_id} "
                f"(the most complete: {problems} problems)"
            )
        chosen.append(best)
    return sorted(chosen, key=lambda c: (c.info.start_time, c.info.run_id))


def resolve_runs(
    client: Any, run_ids: Sequence[str], notices: list[str] | None = None
) -> list[ComparedRun]:
    """Parent ids expand to their finished pipeline runs; pipeline run ids are taken as they are.

    A label used under more than one parent is suffixed ``@<parent id[:8]>``: two experiments'
    "baseline" may differ in model or config and must not be pooled as one pipeline. What was
    chosen or left out while expanding a parent is appended to ``notices``.
    """
    notices = [] if notices is None else notices
    found: dict[str, ComparedRun] = {}
    for run_id in run_ids:
        run = _get_run(client, run_id)
        if "pipeline.label" in run.data.params:
            found.setdefault(run.info.run_id, _as_compared(run))
            continue
        usable = _parent_children(client, run, notices)
        if not usable:
            raise UserError(
                f"run '{run_id}' is neither a pipeline run nor a parent with finished pipeline runs"
            )
        for child in usable:
            found.setdefault(child.info.run_id, _as_compared(child))
    runs = list(found.values())
    parents_by_label: dict[str, set[str]] = {}
    for run in runs:
        parents_by_label.setdefault(run.label, set()).add(run.parent_id)
    clashes = {label for label, parents in parents_by_label.items() if len(parents) > 1}
    runs = [replace(r, label=f"{r.label}@{r.parent_id[:8]}") if r.label in clashes else r for r in runs]
    seen: set[tuple[str, int]] = set()
    for run in runs:
        if (run.label, run.seed) in seen:
            raise UserError(f"two runs of pipeline '{run.label}' with seed {run.seed}; pass one of them")
        seen.add((run.label, run.seed))
    return runs


def _message_counts(client: Any, run_id: str, tmp: Path) -> dict[str, int]:
    """Messages per task from the run's message log (every pipeline publishes through the pool,
    so this counts the same way for all of them)."""
    try:
        path = Path(client.download_artifacts(run_id, "messages.jsonl", str(tmp)))
    except Exception:  # older runs have no message log
        return {}
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            task = json.loads(line).get("task_id", "")
            counts[task] = counts.get(task, 0) + 1
    return counts


def load_problems_frame(client: Any, runs: Sequence[ComparedRun]) -> Any:
    """The per-problem tables of ``runs`` in one frame, ``pipeline`` set to the reported label and
    a ``messages`` column (message log, else ``extra.messages``)."""
    import pandas as pd

    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, run in enumerate(runs):
            target = Path(tmp) / str(index)
            target.mkdir()
            try:
                path = client.download_artifacts(run.run_id, "problems.parquet", str(target))
            except Exception as exc:
                raise UserError(f"run '{run.run_id}' has no problems.parquet artifact") from exc
            frame = upgrade_table(pd.read_parquet(path))  # a run logged by older code reads as today's
            frame["pipeline"], frame["seed"], frame["run_id"] = run.label, run.seed, run.run_id
            counts = _message_counts(client, run.run_id, target)
            if counts:
                frame["messages"] = frame["task_id"].map(counts)
            elif "extra.messages" in frame:
                frame["messages"] = frame["extra.messages"]
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def figure_tables(runs: Sequence[ComparedRun], notices: list[str]) -> dict[str, FigureMetrics]:
    """Per label, the table metrics of its pipeline's figures, as the pipeline's registered
    outcome model summarises them. A run of a pipeline not registered here (renamed, or from
    other code) gets only the columns every pipeline has, and a notice says so."""
    from critiquelab.pipelines.registry import is_pipeline, outcome_model

    pipelines = {run.label: run.pipeline for run in runs}  # a label's runs are of one pipeline
    tables: dict[str, FigureMetrics] = {}
    for label, pipeline in pipelines.items():
        if is_pipeline(pipeline):  # installed, or a module/file reference that still loads
            tables[label] = outcome_model(pipeline).table_metrics
        else:
            notices.append(f"{label}: pipeline '{pipeline}' is not registered here; only the metrics "
                           "every pipeline has are shown")
    return tables


def discordant_links(problems: Any, viewer_url: str) -> tuple[tuple[str, str], ...]:
    """(text, URL) for every problem one run passed and another of the same seed failed: its
    paired view in the viewer at ``viewer_url`` (``critiquelab view``'s root)."""
    from critiquelab.experiments.viewer.server import pair_link

    links = []
    runs = problems[["pipeline", "seed", "run_id"]].drop_duplicates().to_records(index=False)
    outcomes = {run_id: dict(zip(rows["task_id"], rows["passed"], strict=True))
                for run_id, rows in problems.groupby("run_id")}
    for label_a, seed_a, run_a in runs:
        for label_b, seed_b, run_b in runs:
            if label_a >= label_b or seed_a != seed_b:
                continue
            for task, passed in outcomes[run_a].items():
                other = outcomes[run_b].get(task)
                if other is not None and bool(other) != bool(passed):
                    winner = label_a if passed else label_b
                    links.append((f"{task}: {label_a} vs {label_b} seed {seed_a} ({winner} passed)",
                                  pair_link(viewer_url, run_a, run_b, task)))
    return tuple(links)


def _default_out(
    home: Path, run_ids: Sequence[str], runs: Sequence[ComparedRun], single_parent: bool
) -> Path:
    if single_parent:
        return home / "reports" / run_ids[0]
    digest = hashlib.sha256(",".join(sorted(r.run_id for r in runs)).encode()).hexdigest()[:12]
    return home / "reports" / f"cmp-{digest}"


def _log(
    client: Any, runs: Sequence[ComparedRun], target: str | None, out: Path, tags: dict[str, str]
) -> str:
    """Attach the report to ``target`` (the parent run) or to a new comparison run."""
    if target is None:
        created = client.create_run(runs[0].experiment_id, run_name="compare",
                                    tags={COMPARISON_TAG: "true", **tags})
        target = str(created.info.run_id)
        client.log_artifacts(target, str(out), ARTIFACT_PATH)
        client.set_terminated(target)
        return target
    for key, value in tags.items():
        client.set_tag(target, key, value)
    client.log_artifacts(target, str(out), ARTIFACT_PATH)
    return target


def compare_runs(
    runs: str | Sequence[str],
    *,
    home: Path | None = None,
    out: Path | None = None,
    log: bool = True,
    bootstrap_seed: int = 0,
    n_resamples: int = 9999,
    confidence: float = 0.95,
    tracking: str | None = None,
    viewer_url: str | None = None,
) -> ComparisonResult:
    """Compare the pipelines of a parent run (all its children) or of explicit child run ids.

    Unknown ids, runs without results and options out of range (``n_resamples`` 99 to
    1,000,000, ``bootstrap_seed`` 0 to 2**32-1, ``confidence`` strictly between 0 and 1) are
    :class:`UserError`, raised before anything is read or written. ``log=False`` writes the
    files but attaches nothing to MLflow. ``tracking``: the MLflow tracking URI (default
    ``$MLFLOW_TRACKING_URI``, else the data directory's store). ``viewer_url``: where the
    report's links to each problem's transcripts point: a live ``critiquelab view`` (an http(s)
    URL, checked first like the other options, e.g. http://127.0.0.1:8470); by default the
    compared runs' viewer pages are written beside the report (``viewer/``), so the links open
    from disk and travel with the report.
    """
    from critiquelab.eval.statistics import check_bootstrap_options

    check_bootstrap_options(
        n_resamples, bootstrap_seed, confidence, resamples_name="n_resamples", seed_name="bootstrap_seed"
    )
    from critiquelab.experiments.viewer.server import REPORT_PAGES, check_viewer_url

    viewer_url = check_viewer_url(viewer_url) if viewer_url is not None else None
    run_ids = [runs] if isinstance(runs, str) else list(runs)
    if not run_ids:
        raise UserError("compare needs a parent run id or one or more pipeline run ids")
    repeated = sorted({r for r in run_ids if run_ids.count(r) > 1})
    if repeated:
        raise UserError(f"run id {repeated[0]} is given more than once; compare the runs once each")
    if out is not None:
        out = check_writable_dir(out, "the report's directory")
    home = Path(home) if home else default_data_dir()
    client = open_client(home, tracking, f"compare {' '.join(run_ids)}")
    notices: list[str] = []
    resolved = resolve_runs(client, run_ids, notices)
    single_parent = len(run_ids) == 1 and all(r.parent_id == run_ids[0] for r in resolved)
    problems = load_problems_frame(client, resolved)
    out = Path(out) if out else _default_out(home, run_ids, resolved, single_parent)
    title = f"Pipeline comparison: {run_ids[0] if single_parent else f'{len(resolved)} runs'}"
    result = report_comparison(
        problems, resolved, client, out, title=title, notices=notices, bootstrap_seed=bootstrap_seed,
        n_resamples=n_resamples, confidence=confidence, viewer_url=viewer_url or REPORT_PAGES,
    )
    if viewer_url is None:  # the links' pages, written beside the report: they open from disk
        from critiquelab.experiments.viewer.data import ViewerData
        from critiquelab.experiments.viewer.server import Viewer, export

        export(Viewer(ViewerData(client.tracking_uri)), out / REPORT_PAGES, [r.run_id for r in resolved])
    logged = None
    if log:
        tags = {
            "compare.bootstrap_seed": str(bootstrap_seed), "compare.bootstrap_resamples": str(n_resamples),
        }
        if not single_parent:
            tags["critiquelab.compared_runs"] = ",".join(r.run_id for r in resolved)[:5000]
        logged = _log(client, resolved, run_ids[0] if single_parent else None, out, tags)
        log_attribution_metrics(client, logged, result.attribution_metrics)
    result.logged_run_id = logged
    return result


def report_comparison(
    problems: Any, resolved: Sequence[ComparedRun], records: Any, out: Path, *, title: str,
    notices: list[str], bootstrap_seed: int, n_resamples: int, confidence: float,
    viewer_url: str | None = None,
) -> ComparisonResult:
    """The tables, paired tests and sections of a comparison, written to ``out``: from the
    per-problem frame of ``resolved`` and ``records``, anything with ``get_run(id).data`` (an
    MLflow client, or a study's recorded runs — :mod:`critiquelab.experiments.studies`). Logs nothing.
    ``viewer_url``: where discordant problems link to (None: no links, as for a study)."""
    from critiquelab.eval.report import ReportContext, write_report
    from critiquelab.eval.statistics import pairwise_tests, pipeline_summary, sample_coverage_notices

    notices += provenance_notices(records, [r.parent_id for r in resolved])
    notices += [warning for run in resolved for warning in run.warnings]  # the runs' own, repeated
    if len(resolved) == 1:
        notices.append(f"one pipeline run ({resolved[0].label}, seed {resolved[0].seed}): nothing to compare "
                       "it with; the table holds its own figures and there is no paired test")
    table = pipeline_summary(problems, confidence, figure_tables(resolved, notices))
    notices += sample_coverage_notices(table)
    pairs = pairwise_tests(problems, seed=bootstrap_seed, n_resamples=n_resamples, confidence=confidence)
    split = split_controls(table, pairs, resolved)  # controls: a block of their own, never a headline row
    context = ReportContext(
        title, [(r.label, str(r.seed), r.run_id, r.parent_id or "–") for r in resolved],
        bootstrap_seed, n_resamples, confidence, tuple(notices),
        discordant_links(problems, viewer_url) if viewer_url else (),
    )
    out.mkdir(parents=True, exist_ok=True)
    files, markdown = write_report(context, split.table, split.pairs, out)
    added = controls_section(split, out, files)
    attribution = attribution_section(problems, resolved, out, files, viewer_url)  # where problems ended
    added += attribution.markdown
    added += model_cost_section(records, resolved, out, files)  # tokens weighed by each model's speed
    added += learning_section(records, resolved, problems, out, files, seed=bootstrap_seed,
                              n_resamples=n_resamples)
    added += lost_passes_section(records, resolved, problems, out, files)
    if added:
        markdown += added
        files["markdown"].write_text(markdown)
    return ComparisonResult(
        split.table, split.pairs, problems, markdown, out, files, list(resolved), None, bootstrap_seed,
        notices, split.controls, attribution.metrics,
    )
