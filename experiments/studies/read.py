"""Load a study folder, check it, and re-analyse it from its files alone.

From a notebook::

    from critiquelab.experiments.studies.read import load_study
    study = load_study("studies/test_half_selection")
    study.outcomes                      # pandas DataFrame: one row per arm × seed × problem
    study.manifest.evidence             # 'held_out' or 'in_sample'
    print(study.compare().markdown)     # compare's tables and paired tests, re-computed

Every check is one :class:`critiquelab.core.errors.UserError` line (exit 2 from the CLI): a missing or altered
file, a manifest of another format, an outcome line without a required column or a task id
twice for one arm and seed, a run that had not finished.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from pydantic import ValidationError

from critiquelab.core.config import explain
from critiquelab.core.errors import UserError
from critiquelab.experiments.compare.compared_run import ComparedRun
from critiquelab.experiments.studies.files import (
    CHECKSUMMED,
    EVIDENCE_TEXT,
    MANIFEST,
    OUTCOME_COLUMNS,
    OUTCOMES,
    RUNS,
    SCHEMA,
    SPEC,
    RecordedRun,
    StudyManifest,
)


def is_study(target: str | Path) -> bool:
    """``target`` names a study folder (a folder with a manifest) rather than a run id."""
    return (Path(target) / MANIFEST).is_file()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class RecordedRuns:
    """A study's runs answering ``get_run(id).data.{params,metrics,tags}`` as an MLflow client
    does, so compare's sections read a study exactly as they read the live store."""

    def __init__(self, runs: list[RecordedRun]) -> None:
        self._by_id = {run.run_id: run for run in runs}

    def get_run(self, run_id: str) -> Any:
        try:
            run = self._by_id[run_id]
        except KeyError:
            raise UserError(f"run {run_id} is not among the study's recorded runs") from None
        return SimpleNamespace(
            info=SimpleNamespace(run_id=run.run_id, status=run.status, start_time=run.start_time,
                                 end_time=run.end_time),
            data=SimpleNamespace(params=run.params, metrics=run.metrics, tags=run.tags),
        )


@dataclass(frozen=True)
class Study:
    """A study as its files hold it."""

    path: Path
    manifest: StudyManifest
    specs: list[dict[str, Any]]  # the spec as run, one per experiment (parent) run
    runs: list[RecordedRun]  # parents first, then one per arm × seed
    outcomes: Any  # pandas DataFrame: one row per arm × seed × problem (outcomes.jsonl)

    @property
    def arms(self) -> list[ComparedRun]:
        """The pipeline runs, in the order they ran, as compare reports them."""
        return [ComparedRun(r.run_id, r.parent_id, "", r.label, r.seed, r.pipeline, r.control, r.warnings)
                for r in self.runs if r.label]

    @property
    def evidence_text(self) -> str:
        text = EVIDENCE_TEXT[self.manifest.evidence]
        return f"{text}; tuned on: {self.manifest.tuned_on}" if self.manifest.tuned_on else text

    def compare(
        self, out: Path | None = None, *, bootstrap_seed: int = 0, n_resamples: int = 9999,
        confidence: float = 0.95,
    ) -> Any:
        """compare's report (:class:`critiquelab.experiments.compare.runs.ComparisonResult`) re-computed from
        the study's files; written to ``out`` (default: a temporary folder, removed afterwards)."""
        from critiquelab.eval.statistics import check_bootstrap_options
        from critiquelab.experiments.compare.runs import report_comparison

        check_bootstrap_options(n_resamples, bootstrap_seed, confidence, resamples_name="--resamples",
                                seed_name="--bootstrap-seed")
        frame = self.outcomes.rename(columns={"arm": "pipeline"})
        notices = [f"study {self.manifest.name}: {self.evidence_text}", *self.manifest.notes]
        dataset = self.manifest.dataset
        title = f"Study {self.manifest.name}: {dataset.source}, {dataset.split} split"
        with tempfile.TemporaryDirectory() as tmp:
            return report_comparison(
                frame, self.arms, RecordedRuns(self.runs), Path(out) if out is not None else Path(tmp),
                title=title, notices=notices, bootstrap_seed=bootstrap_seed, n_resamples=n_resamples,
                confidence=confidence,
            )


def _refuse(folder: Path, problem: str) -> UserError:
    return UserError(f"study '{folder}': {problem}")


def _manifest(folder: Path) -> StudyManifest:
    path = folder / MANIFEST
    if not folder.is_dir():
        raise _refuse(folder, "no such folder")
    if not path.is_file():
        raise _refuse(folder, f"no {MANIFEST}: not a study folder (write one with `critiquelab study write`)")
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise _refuse(folder, f"{MANIFEST} is not JSON ({exc})") from exc
    if isinstance(data, dict) and data.get("schema") != SCHEMA:
        raise _refuse(folder, f"{MANIFEST}: schema '{data.get('schema')}' is not {SCHEMA}, the format "
                      "this version reads")
    try:
        return StudyManifest.model_validate(data)
    except ValidationError as exc:
        raise _refuse(folder, explain(exc, where=MANIFEST, model=StudyManifest)) from exc


def _check_files(folder: Path, manifest: StudyManifest) -> None:
    for name in CHECKSUMMED:
        path = folder / name
        if not path.is_file():
            raise _refuse(folder, f"{name} is missing")
        expected = manifest.files.get(name)
        if expected is None:
            raise _refuse(folder, f"{MANIFEST} holds no checksum for {name}")
        if file_sha256(path) != expected:
            raise _refuse(folder, f"{name} does not match its SHA-256 in {MANIFEST} (changed after the "
                          "study was written; write it again with `critiquelab study write --replace`)")


def _outcome_rows(folder: Path) -> list[dict[str, Any]]:
    rows, seen = [], set()
    for number, line in enumerate((folder / OUTCOMES).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise _refuse(folder, f"{OUTCOMES} line {number} is not JSON ({exc.args[0]})") from exc
        if not isinstance(row, dict):
            raise _refuse(folder, f"{OUTCOMES} line {number} is not a JSON object")
        absent = [c for c in OUTCOME_COLUMNS if c not in row]
        if absent:
            raise _refuse(folder, f"{OUTCOMES} line {number} has no '{absent[0]}' column")
        kinds = {"arm": str, "seed": int, "task_id": str, "run_id": str, "passed": bool}
        wrong = next((c for c, kind in kinds.items() if not isinstance(row[c], kind)), None)
        if wrong is not None:
            raise _refuse(folder, f"{OUTCOMES} line {number}: '{wrong}' is not a {kinds[wrong].__name__}")
        key = (row["arm"], row["seed"], row["task_id"])
        if key in seen:
            raise _refuse(folder, f"{OUTCOMES} line {number}: task id {row['task_id']} appears twice for "
                          f"arm {row['arm']} seed {row['seed']}")
        seen.add(key)
        rows.append(row)
    if not rows:
        raise _refuse(folder, f"{OUTCOMES} holds no outcome")
    return rows


def _runs(folder: Path, rows: list[dict[str, Any]]) -> list[RecordedRun]:
    try:
        runs = [RecordedRun.model_validate(r) for r in json.loads((folder / RUNS).read_text())]
    except ValidationError as exc:
        raise _refuse(folder, explain(exc, where=RUNS, model=RecordedRun)) from exc
    except (ValueError, TypeError) as exc:
        raise _refuse(folder, f"{RUNS} is not a list of recorded runs ({str(exc).splitlines()[0]})") from exc
    unfinished = [r for r in runs if r.status != "FINISHED"]
    if unfinished:
        raise _refuse(folder, f"run {unfinished[0].run_id} had not finished ({unfinished[0].status}): a "
                      "study holds finished runs only")
    arms = {r.run_id for r in runs if r.label}
    stray = next((row for row in rows if row["run_id"] not in arms), None)
    if stray is not None:
        raise _refuse(folder, f"{OUTCOMES}: run {stray['run_id']} of arm {stray['arm']} is not in {RUNS}")
    return runs


def load_study(path: str | Path, *, verify: bool = True) -> Study:
    """The study in folder ``path``, checked (``verify=False`` skips only the checksums, for the
    writer's own first read). Bad input is one :class:`UserError` line."""
    import pandas as pd

    folder = Path(path)
    manifest = _manifest(folder)
    if verify:
        _check_files(folder, manifest)
    rows = _outcome_rows(folder)
    runs = _runs(folder, rows)
    try:
        specs = [s for s in yaml.safe_load_all((folder / SPEC).read_text()) if s is not None]
    except yaml.YAMLError as exc:
        raise _refuse(folder, f"{SPEC} is not YAML ({str(exc).splitlines()[0]})") from exc
    return Study(folder, manifest, specs, runs, pd.DataFrame(rows))
