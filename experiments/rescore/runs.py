"""Score a finished run's final programs again, on another dataset's tests for the same task ids
(``inspect score`` for critiquelab): how much of a HumanEval pass@1 survives HumanEval+'s tests?

From a notebook::

    from critiquelab.experiments.rescore.runs import rescore_run
    result = rescore_run("<run id>", "HumanEvalPlus.jsonl", dataset_format="evalplus")
    print(result.table())          # per pipeline: passed before / after, lost, gained, pass@1
    result.runs[0].change.lost     # task ids that passed the original tests and fail these

What is rescored is each pipeline run's per-problem table (``problems.parquet``): its
``final_code`` — the assembled program that was scored — runs as it is in the sandbox against
the other dataset's hidden test. No model is called. The table keeps no code of the other
candidates it scored (vote's samples, debaters' answers, tree-search nodes, a first version):
only their pass flags, which are left out of the rescored table rather than kept from the old
tests. RUN_ID may be a pipeline run (one new run) or a parent run (a new parent holding one new
run per pipeline run). Each new run sits in the original's experiment, tagged
``critiquelab.rescored_from`` with the run it rescored, its label ``<label>+rescored``, so
``critiquelab compare`` of both shows the passes lost.

Everything is read and scored before anything is written: an unknown run, a dataset that cannot
be read or shares no task id with the run is one line (exit 2) and leaves no run behind.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import dataset_fingerprint, load_problems, read_rows
from critiquelab.eval.execution import DEFAULT_TIMEOUT_S, isolation_level
from critiquelab.eval.formats import detect_format
from critiquelab.eval.pass_changes import PassChange, changes_markdown, listed, pass_change
from critiquelab.eval.problems import Problem
from critiquelab.eval.result_schema import upgrade_table
from critiquelab.eval.scoring import NO_CODE, score_programs
from critiquelab.eval.verdict import Status
from critiquelab.experiments.compare.compared_run import ComparedRun
from critiquelab.experiments.compare.runs import open_client, resolve_runs
from critiquelab.experiments.paths import check_writable_dir
from critiquelab.experiments.paths import data_dir as default_data_dir
from critiquelab.experiments.rescore.pairs import RESCORED_FROM_TAG
from critiquelab.experiments.tracking.compare_provenance import MEASURING_PARAMS
from critiquelab.experiments.tracking.provenance import code_fingerprint
from critiquelab.experiments.tracking.store import CHILD_TAG, Tracker, tracking_uri

LABEL_SUFFIX = "+rescored"


class RescoredRun(BaseModel):
    """One pipeline run and its rescore."""

    original_run_id: str = Field(description="The pipeline run whose final programs were rescored.")
    run_id: str = Field(description="The new pipeline run holding the rescored table.")
    label: str = Field(description="The new run's pipeline label: the original's + '+rescored'.")
    change: PassChange = Field(description="Passed before and after, lost and gained, on the common tasks.")


class _Rescored(BaseModel):
    """What every rescore reports: the tests used, what was left out, where its files are."""

    dataset: str = Field(description="The dataset whose tests were used, as given.")
    dataset_format: str = Field(description="Its format (given or detected).")
    dataset_fingerprint: str = Field(description="Its SHA-256 ('humaneval' for the package's; for an "
                                     "hf:// dataset, datasets' fingerprint of the split read).")
    missing: list[str] = Field(description="The task ids the dataset lacks, left out.")
    notices: list[str] = Field(default_factory=list, description="One line each: what was left out.")
    out_dir: Path = Field(description="Where summary.md and changes.csv were written.")


class RescoreResult(_Rescored):
    """What a rescore of MLflow runs read, scored and logged."""

    source_run_id: str = Field(description="The run given: a pipeline run or a parent run.")
    run_id: str = Field(description="The new run: the rescored pipeline run, or the parent of them.")
    experiment_id: str = Field(description="The MLflow experiment of both.")
    runs: list[RescoredRun] = Field(description="One per pipeline run rescored.")

    def table(self) -> str:
        """Per pipeline × seed: problems, passed before / after, lost, gained, pass@1 before / after."""
        return changes_markdown([r.change for r in self.runs])


def _problems_table(client: Any, run: ComparedRun, tmp: Path) -> Any:
    import pandas as pd

    target = tmp / run.run_id
    target.mkdir()
    try:
        return pd.read_parquet(client.download_artifacts(run.run_id, "problems.parquet", str(target)))
    except Exception as exc:  # MLflow raises several types for a missing artifact
        raise UserError(f"run '{run.run_id}' has no problems.parquet artifact (not finished?)") from exc


def _hidden_test_flags(table: Any, pipeline: str) -> list[str]:
    """Columns of pass flags on the old hidden tests for code the table does not keep, as the
    pipeline's outcome model declares them
    (:meth:`critiquelab.pipelines.outcomes.Outcome.hidden_test_figures`): the first version's, and every
    candidate list (vote samples, debaters, tree-search nodes) that holds a value. Flags on visible or
    generated tests (``qa_passed``) stay. A pipeline not registered here (renamed, or from other code): those
    of every registered pipeline."""
    from critiquelab.pipelines.registry import is_pipeline, outcome_model, pipeline_names

    models = [outcome_model(pipeline)] if is_pipeline(pipeline) else [
        outcome_model(name) for name in pipeline_names()]
    declared = {figure for model in models for figure in model.hidden_test_figures()}
    return [column for column in table.columns if column.startswith("extra.")
            and column.removeprefix("extra.") in declared
            and (column == "extra.first_passed" or table[column].notna().any())]


def _timeout(client: Any, run_id: str, parent_id: str) -> float:
    """The original experiment's per-test limit, so a program is not failed by a shorter one."""
    for candidate in (parent_id, run_id):
        if candidate:
            value = client.get_run(candidate).data.params.get("config.execution.timeout_s")
            if value is not None:
                return float(value)
    return DEFAULT_TIMEOUT_S


def _rescored_table(table: Any, by_id: dict[str, Problem], timeout_s: float, pipeline: str) -> Any:
    """The original table on the dataset's tasks, status / reason / detail / passed from the new
    tests. A reply that held no code stays failed as it was: there is no program to run."""
    kept = upgrade_table(table[table["task_id"].isin(list(by_id))]).copy().reset_index(drop=True)
    runnable = [i for i in range(len(kept)) if kept.at[i, "reason"] != NO_CODE]
    verdicts = score_programs(
        [(by_id[kept.at[i, "task_id"]], str(kept.at[i, "final_code"])) for i in runnable], timeout_s
    )
    for i, verdict in zip(runnable, verdicts, strict=True):
        kept.at[i, "status"], kept.at[i, "reason"] = verdict.status.value, verdict.reason
        kept.at[i, "detail"], kept.at[i, "passed"] = verdict.detail, verdict.passed
        kept.at[i, "isolation"] = verdict.isolation
    return kept.drop(columns=_hidden_test_flags(kept, pipeline))


def _metrics(table: Any, change: PassChange, missing: int) -> dict[str, float]:
    """The figures a run logs that the rescore changes or keeps, and what it changed."""
    problems = len(table)
    tokens = float(table["total_tokens"].sum())
    metrics = {
        "problems": problems, "problems_passed": int(table["passed"].sum()),
        "prompt_tokens": float(table["prompt_tokens"].sum()),
        "completion_tokens": float(table["completion_tokens"].sum()),
        "total_tokens": tokens, "lm_calls": float(table["lm_calls"].sum()),
        "rescore.passed_before": change.passed_before, "rescore.lost": len(change.lost),
        "rescore.gained": len(change.gained), "rescore.missing": missing,
        **{f"status.{s.value}": int((table["status"] == s.value).sum()) for s in Status},
    }
    if problems:  # a mean over no problem is absent, never 0 (as critiquelab.eval.summary logs it)
        metrics["pass_at_1"] = float(table["passed"].mean())
        metrics["tokens_per_problem"] = tokens / problems
    return metrics


@dataclass(frozen=True)
class _Scored:
    """One pipeline run read and rescored; nothing written yet."""

    run: ComparedRun
    before: dict[str, bool]  # task id -> passed on the original tests (every task of the run)
    table: Any  # the rescored per-problem table (the dataset's tasks only)
    change: PassChange


def _outcomes(table: Any) -> dict[str, bool]:
    return dict(zip(table["task_id"].astype(str), table["passed"].astype(bool), strict=True))


def _score(client: Any, runs: list[ComparedRun], source: str, chosen_format: str, run_id: str,
           notices: list[str]) -> tuple[list[_Scored], list[str], int]:
    """Every run's table rescored on the dataset (read first, written nowhere), the run's task
    ids the dataset lacks, and the number of tasks rescored."""
    with tempfile.TemporaryDirectory() as tmp:
        originals = {r.run_id: _problems_table(client, r, Path(tmp)) for r in runs}
    by_id = {p.task_id: p for p in load_problems(source, dataset_format=chosen_format)}
    tasks = list(dict.fromkeys(str(t) for table in originals.values() for t in table["task_id"]))
    missing = [t for t in tasks if t not in by_id]
    if len(missing) == len(tasks):
        raise UserError(f"dataset '{source}' has none of the {len(tasks)} task ids of run {run_id} "
                        f"(e.g. {listed(tasks, 3)}): nothing to rescore")
    if missing:
        notices.append(f"{len(missing)} of {len(tasks)} task ids of run {run_id} are not in dataset "
                       f"'{source}' and were left out: {listed(missing)}")
    scored: list[_Scored] = []
    dropped: set[str] = set()
    for run in runs:
        original = originals[run.run_id]
        table = _rescored_table(original, by_id, _timeout(client, run.run_id, run.parent_id), run.pipeline)
        # The first version's flag goes too (see _hidden_test_flags), without a notice: for most
        # pipelines the first version is the final one.
        dropped.update(c for c in _hidden_test_flags(original, run.pipeline) if c != "extra.first_passed")
        before = _outcomes(original)
        scored.append(_Scored(run, before, table, pass_change(run.label, run.seed, before, _outcomes(table))))
    if dropped:
        notices.append(f"the runs' tables keep only pass flags, no code, for {', '.join(sorted(dropped))}: "
                       "final programs only were rescored; those flags are left out of the rescored tables")
    return scored, missing, len(tasks) - len(missing)


def _log_runs(
    tracker: Tracker, client: Any, source_run: Any, scored: list[_Scored], dataset_params: dict[str, str],
    *, as_parent: bool, rescored_tasks: int, missing: int,
) -> tuple[str | None, list[RescoredRun]]:
    """The new parent (when a parent run was rescored) and one new pipeline run per rescored one."""
    parent_id = None
    if as_parent:
        parent_id = tracker.start_run(f"{source_run.info.run_name}{LABEL_SUFFIX}", tags={
            RESCORED_FROM_TAG: source_run.info.run_id, "critiquelab.code_fingerprint": code_fingerprint()})
        # How the programs were made, as the original logged it; how they were scored, as now.
        made = {k: v for k, v in source_run.data.params.items() if k in MEASURING_PARAMS}
        tracker.log_params(parent_id, {
            **made, "config.dataset.source": dataset_params["dataset.source"],
            "config.dataset.format": dataset_params["dataset.format"],
            "config.dataset.challenge_tests": "false", "isolation": isolation_level(),
            "problems": rescored_tasks, **dataset_params,
        })
    done = []
    for item in scored:
        run, label = item.run, f"{item.run.label}{LABEL_SUFFIX}"
        params = client.get_run(run.run_id).data.params
        child = tracker.start_run(f"{label}-seed{run.seed}", parent_id=parent_id, tags={
            CHILD_TAG: f"{label}/seed={run.seed}", RESCORED_FROM_TAG: run.run_id})
        tracker.log_params(child, {
            **{k: v for k, v in params.items() if k.startswith("pipeline.params.")},
            "pipeline": params.get("pipeline", run.label), "pipeline.label": label, "seed": run.seed,
            "rescore.original_label": run.label, **dataset_params,
        })
        table = item.table.assign(pipeline=label)
        tracker.log_metrics(child, _metrics(table, item.change, missing))
        tracker.log_frame(child, table, "problems")
        tracker.finish(child)
        done.append(RescoredRun(original_run_id=run.run_id, run_id=child, label=label, change=item.change))
    return parent_id, done


def _write_files(result: RescoreResult, scored: list[_Scored]) -> None:
    """``summary.md`` (what the CLI prints) and ``changes.csv`` (a row per pipeline × seed × task)."""
    import pandas as pd

    notes = "".join(f"\nNote: {n}\n" for n in result.notices)
    result.out_dir.mkdir(parents=True, exist_ok=True)
    (result.out_dir / "summary.md").write_text(
        f"# Rescore of {result.source_run_id} on {result.dataset} ({result.dataset_format})\n\n"
        f"{result.table()}{notes}"
    )
    rows = [row for item in scored for row in _change_rows(item.run, item.before, item.table)]
    pd.DataFrame(rows).to_csv(result.out_dir / "changes.csv", index=False)


def _change_rows(run: ComparedRun, before: dict[str, bool], table: Any) -> list[dict[str, Any]]:
    """``changes.csv``'s rows of one run: each task's pass before and after, and why after."""
    return [{"pipeline": run.label, "seed": run.seed, "task_id": task, "passed_before": before[task],
             "passed_after": bool(passed), "reason_after": reason}
            for task, passed, reason in zip(table["task_id"].astype(str), table["passed"], table["reason"],
                                            strict=True)]


def rescore_run(
    run_id: str,
    dataset: str | Path,
    *,
    dataset_format: str | None = None,
    home: Path | None = None,
    out: Path | None = None,
    tracking: str | None = None,
) -> RescoreResult:
    """Rescore ``run_id``'s final programs on ``dataset``'s tests (see the module docstring).
    ``dataset_format``: humaneval, mbpp or evalplus (default: detected from the columns).
    ``out``: where ``summary.md`` and ``changes.csv`` go (default
    ``<data dir>/reports/rescore-<new run id>``); they are also artifacts of the new run."""
    source = str(dataset)
    if out is not None:
        out = check_writable_dir(out, "where the rescore's files would go")
    home = Path(home) if home else default_data_dir()
    # The dataset first: a file that is not there is the command's own mistake, whatever the store.
    chosen_format = dataset_format or detect_format({c for row in read_rows(source) for c in row})[0]
    client = open_client(home, tracking, f"rescore {run_id}")
    notices: list[str] = []
    runs = resolve_runs(client, [run_id], notices)
    scored, missing, rescored_tasks = _score(client, runs, source, chosen_format, run_id, notices)

    # Everything read and scored: only now is anything written, the files' directory first, so
    # that one that cannot be made (checked above, but things change) leaves no run behind.
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"where the rescore's files would go: cannot create '{out}': "
                            f"{exc.strerror}") from exc
    source_run = client.get_run(run_id)
    experiment = client.get_experiment(source_run.info.experiment_id).name
    tracker = Tracker(home, experiment, tracking_uri(home, tracking))
    fingerprint = dataset_fingerprint(source)
    dataset_params = {"dataset.source": source, "dataset.format": chosen_format,
                      "dataset.fingerprint": fingerprint}
    parent_id, done = _log_runs(
        tracker, client, source_run, scored, dataset_params,
        as_parent=[r.run_id for r in runs] != [run_id], rescored_tasks=rescored_tasks, missing=len(missing),
    )
    top = parent_id or done[0].run_id
    result = RescoreResult(
        source_run_id=run_id, run_id=top, experiment_id=tracker.experiment_id, dataset=source,
        dataset_format=chosen_format, dataset_fingerprint=fingerprint, runs=done, missing=missing,
        notices=notices, out_dir=Path(out) if out else home / "reports" / f"rescore-{top}",
    )
    _write_files(result, scored)
    tracker.client.log_artifacts(top, str(result.out_dir), "rescore")
    if parent_id:
        tracker.finish(parent_id)
    return result


class StudyRescore(_Rescored):
    """A study's final programs scored on another dataset's tests; nothing is logged."""

    study: str = Field(description="The study folder rescored.")
    changes: list[PassChange] = Field(description="Per arm × seed: passed before and after, lost, gained.")

    def table(self) -> str:
        return changes_markdown(self.changes)


def rescore_study(
    study: str | Path, dataset: str | Path, *, dataset_format: str | None = None, out: Path | None = None,
    home: Path | None = None,
) -> StudyRescore:
    """Score a committed study's final programs on ``dataset``'s tests, from its files alone (no
    data directory, no MLflow, no model): ``critiquelab rescore STUDY_DIR --dataset FILE``.
    ``out`` defaults to ``<data dir>/reports/rescore-<study name>``; the study folder itself is
    never written (its checksums would no longer hold)."""
    from critiquelab.experiments.studies.read import load_study

    loaded = load_study(study)
    source = str(dataset)
    chosen_format = dataset_format or detect_format({c for row in read_rows(source) for c in row})[0]
    by_id = {p.task_id: p for p in load_problems(source, dataset_format=chosen_format)}
    tasks = [str(t) for t in dict.fromkeys(loaded.outcomes["task_id"])]
    missing = [t for t in tasks if t not in by_id]
    if len(missing) == len(tasks):
        raise UserError(f"dataset '{source}' has none of the {len(tasks)} task ids of study "
                        f"{loaded.manifest.name} (e.g. {listed(tasks, 3)}): nothing to rescore")
    notices = [f"{len(missing)} of {len(tasks)} task ids are not in dataset '{source}' and were left out: "
               f"{listed(missing)}"] if missing else []
    timeout_s = float(((loaded.specs[0] if loaded.specs else {}).get("execution") or {}).get(
        "timeout_s", DEFAULT_TIMEOUT_S))
    out = check_writable_dir(out, "where the rescore's files would go") if out is not None else (
        (Path(home) if home else default_data_dir()) / "reports" / f"rescore-{loaded.manifest.name}")
    changes, rows = [], []
    for arm in loaded.arms:
        original = loaded.outcomes[loaded.outcomes["run_id"] == arm.run_id].reset_index(drop=True)
        table = _rescored_table(original.fillna({"reason": "", "detail": ""}), by_id, timeout_s, arm.pipeline)
        before = _outcomes(original)
        changes.append(pass_change(arm.label, arm.seed, before, _outcomes(table)))
        rows += _change_rows(arm, before, table)
    result = StudyRescore(
        study=str(study), dataset=source, dataset_format=chosen_format,
        dataset_fingerprint=dataset_fingerprint(source), changes=changes, missing=missing, notices=notices,
        out_dir=out,
    )
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    notes = "".join(f"\nNote: {n}\n" for n in notices)
    (out / "summary.md").write_text(f"# Rescore of study {loaded.manifest.name} on {source} ({chosen_format})"
                                    f"\n\n{result.table()}{notes}")
    pd.DataFrame(rows).to_csv(out / "changes.csv", index=False)
    return result
