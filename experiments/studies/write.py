"""Write a study from finished MLflow runs (``critiquelab study write``, ``run --study``).

The folder is assembled in a temporary directory beside its destination and moved into place
only when every file is written and its summary re-computed from those files, so a refused or
interrupted write leaves nothing behind and a study's summary is by construction what
``critiquelab compare STUDY`` prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from critiquelab.core.errors import UserError
from critiquelab.eval.results import plain_cell
from critiquelab.experiments.compare.compared_run import ComparedRun
from critiquelab.experiments.compare.runs import load_problems_frame, open_client, resolve_runs
from critiquelab.experiments.paths import data_dir as default_data_dir
from critiquelab.experiments.serving.model_files import resolve_bundled
from critiquelab.experiments.studies.files import (
    CHECKSUMMED,
    MANIFEST,
    OUTCOMES,
    RUNS,
    SPEC,
    SUMMARY,
    Evidence,
    RecordedRun,
    StudyDataset,
    StudyManifest,
)
from critiquelab.experiments.studies.read import file_sha256, load_study
from critiquelab.experiments.tracking.store import PARENT_TAG

# MLflow's own bookkeeping tags (the run's source file, user, log-model history …) say nothing
# about the measurement and differ per machine; the parent link is kept.
_KEPT_MLFLOW_TAGS = {PARENT_TAG, "mlflow.runName"}


def _iso(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, tz=UTC).isoformat(timespec="seconds")


def _machine() -> str:
    cpu = ""
    with contextlib.suppress(OSError):  # not Linux: the CPU's name is left out
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores{f', {cpu}' if cpu else ''}"


def _recorded(run: Any, compared: ComparedRun | None = None) -> RecordedRun:
    tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.") or k in _KEPT_MLFLOW_TAGS}
    fields: dict[str, Any] = {}
    if compared is not None:
        fields = {"parent_id": compared.parent_id, "label": compared.label, "seed": compared.seed,
                  "pipeline": compared.pipeline, "control": compared.control, "warnings": compared.warnings}
    return RecordedRun(
        run_id=run.info.run_id, status=run.info.status, start_time=run.info.start_time or 0,
        end_time=run.info.end_time or 0, params=dict(run.data.params), metrics=dict(run.data.metrics),
        tags=tags, **fields,
    )


def _finished(run: Any, what: str) -> None:
    if run.info.status != "FINISHED":
        raise UserError(f"{what} {run.info.run_id} has not finished ({run.info.status}): a study is "
                        "written from finished runs; resume it with the same `critiquelab run` first")


def _role_models(spec: Mapping[str, Any], label: str) -> dict[str, str]:
    """Each role's model in arm ``label`` of a spec as run, for the roles the arm gave their own."""
    for arm in spec.get("pipelines", []):
        if (arm.get("label") or arm.get("name")) == label:
            return {role: str(cfg["model"]) for role, cfg in (arm.get("roles") or {}).items()
                    if (cfg or {}).get("model")}
    return {}


def _outcome_lines(problems: Any, specs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """compare's per-problem frame as outcome lines: the arm first, empty cells left out, usage
    by role as an object and the tokens summed per model that answered each role."""
    lines = []
    for row in problems.to_dict("records"):
        cells = {k: plain_cell(v) for k, v in row.items() if k != "pipeline"}
        usage = cells.pop("usage_by_role", None)
        usage = json.loads(usage) if isinstance(usage, str) else (usage or {})
        spec = specs.get(str(row["run_id"]), {})
        default = str((spec.get("model") or {}).get("id", "model"))
        roles = _role_models(spec, str(row["pipeline"]).split("@")[0])
        by_model: dict[str, int] = {}
        for role, used in usage.items():
            model = roles.get(role, default)
            tokens = used.get("prompt_tokens", 0) + used.get("completion_tokens", 0)
            by_model[model] = by_model.get(model, 0) + int(tokens)
        if not by_model:  # a table from before usage by role was kept: one model answered it all
            by_model = {default: int(cells.get("prompt_tokens", 0)) + int(cells.get("completion_tokens", 0))}
        line = {"arm": row["pipeline"], **{k: v for k, v in cells.items() if v is not None}}
        lines.append({**line, "usage_by_role": usage, "tokens_by_model": by_model})
    return lines


def _model_hashes(parents: Sequence[RecordedRun], specs: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    hashes: dict[str, str] = {}
    for parent, spec in zip(parents, specs, strict=True):
        hashes[parent.params.get("config.model.id", "model")] = parent.params.get("model.file_sha256", "n/a")
        for arm in spec.get("pipelines", []):
            for cfg in (arm.get("roles") or {}).values():
                model = (cfg or {}).get("model")
                if model and model not in hashes:
                    bundled = resolve_bundled(str(model))
                    hashes[str(model)] = bundled.sha256 if bundled else "n/a"
    return hashes


def check_destination(out: Path, replace: bool) -> None:
    """A study folder can be written at ``out``: absent, empty, or ``replace`` given."""
    if out.exists() and not out.is_dir():
        raise UserError(f"study folder '{out}' exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not replace:
        raise UserError(f"study folder '{out}' already holds files; pass --replace to write it anew")


def write_study(
    run_ids: str | Sequence[str],
    out: str | Path,
    *,
    evidence: Evidence,
    tuned_on: str = "",
    notes: Sequence[str] = (),
    description: str | None = None,
    home: Path | None = None,
    tracking: str | None = None,
    replace: bool = False,
) -> Path:
    """Write the study of ``run_ids`` (parent runs, or pipeline runs) into the folder ``out``
    and return it. Every run must have finished; a folder holding files is refused unless
    ``replace``. ``evidence``: held_out or in_sample (what a reader is told beside each figure);
    ``tuned_on``: which problems any choice reported here was tuned on."""
    ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
    if not ids:
        raise UserError("study write needs a parent run id or one or more pipeline run ids")
    out = Path(out)
    check_destination(out, replace)
    client = open_client(Path(home) if home else default_data_dir(), tracking, f"study write {' '.join(ids)}")
    resolved, records, specs = _finished_runs(client, ids)
    parent_ids = [r.run_id for r in records if not r.label]
    spec_by_run = {r.run_id: specs[parent_ids.index(r.parent_id)] if r.parent_id else {} for r in resolved}
    problems = load_problems_frame(client, resolved)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        staging = Path(tmp) / "study"
        staging.mkdir()
        (staging / SPEC).write_text("---\n".join(yaml.safe_dump(s, sort_keys=False) for s in specs))
        with (staging / OUTCOMES).open("w") as handle:
            for line in _outcome_lines(problems, spec_by_run):
                handle.write(json.dumps(line, sort_keys=False, ensure_ascii=False) + "\n")
        (staging / RUNS).write_text(json.dumps([r.model_dump(mode="json") for r in records], indent=1) + "\n")
        (staging / SUMMARY).write_text("")
        manifest = _manifest(out.name, description, evidence, tuned_on, notes, records, specs, problems,
                             resolved)
        _write_manifest(staging, manifest)
        study = load_study(staging, verify=False)
        (staging / SUMMARY).write_text(study.compare(Path(tmp) / "report").markdown)
        _write_manifest(staging, manifest)
        load_study(staging)  # what was written reads back and its checksums hold
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    return out


def _finished_runs(
    client: Any, ids: Sequence[str]
) -> tuple[list[ComparedRun], list[RecordedRun], list[dict[str, Any]]]:
    """The pipeline runs ``ids`` name (a parent: all of its), their records — parents first —
    and each parent's spec as run; a run that has not finished is one UserError line."""
    notices: list[str] = []
    resolved = resolve_runs(client, ids, notices)
    missing = [n for n in notices if "has no finished run" in n]
    if missing:
        raise UserError(f"{missing[0]}: a study is written from finished runs only")
    children = [client.get_run(r.run_id) for r in resolved]
    for child in children:
        _finished(child, "pipeline run")
    parent_ids = list(dict.fromkeys(r.parent_id for r in resolved if r.parent_id))
    parents = [client.get_run(p) for p in parent_ids]
    for parent in parents:
        _finished(parent, "experiment run")
    records = [_recorded(p) for p in parents]
    records += [_recorded(c, r) for c, r in zip(children, resolved, strict=True)]
    return resolved, records, [_spec_of(client, p) for p in parent_ids]


def _spec_of(client: Any, parent_id: str) -> dict[str, Any]:
    from critiquelab.experiments.run_export import artifact_text

    text = artifact_text(client, parent_id, "config.yaml")
    if text is None:
        raise UserError(f"experiment run {parent_id} has no config.yaml artifact (not a critiquelab run?)")
    loaded = yaml.safe_load(text)
    return loaded if isinstance(loaded, dict) else {}


def _manifest(
    name: str, description: str | None, evidence: Evidence, tuned_on: str, notes: Sequence[str],
    records: Sequence[RecordedRun], specs: Sequence[Mapping[str, Any]],
    problems: Any, resolved: Sequence[ComparedRun],
) -> StudyManifest:
    parent_records = [r for r in records if not r.label]
    child_records = [r for r in records if r.label]
    first = parent_records[0] if parent_records else child_records[0]
    spec = specs[0] if specs else {}
    return StudyManifest(
        name=name, description=description if description is not None else str(spec.get("description", "")),
        evidence=evidence, tuned_on=tuned_on, notes=tuple(notes),
        dataset=StudyDataset(
            source=str((spec.get("dataset") or {}).get("source", "")),
            split=first.params.get("dataset.split", "all"), problems=int(problems["task_id"].nunique()),
        ),
        parent_run_ids=tuple(r.run_id for r in parent_records),
        run_ids={f"{r.label}/seed={r.seed}": r.run_id for r in resolved},
        git_commit=first.tags.get("git_commit", "unknown"),
        code_fingerprint=first.tags.get("critiquelab.code_fingerprint", ""),
        model_sha256=_model_hashes(parent_records, specs),
        versions={k.removeprefix("version."): v for k, v in first.params.items() if k.startswith("version.")},
        started=_iso(min(r.start_time for r in child_records)),
        ended=_iso(max(r.end_time for r in child_records)),
        wall_time_s=round(sum(r.metrics.get("wall_time_s", 0.0) for r in child_records), 1),
        lm_calls=int(problems["lm_calls"].sum()),
        cached_lm_calls=int(problems["cached_lm_calls"].sum()) if "cached_lm_calls" in problems else 0,
        machine=_machine(), written=datetime.now(UTC).isoformat(timespec="seconds"), files={},
    )


def _write_manifest(folder: Path, manifest: StudyManifest) -> None:
    sums = {name: file_sha256(folder / name) for name in CHECKSUMMED}
    complete = manifest.model_copy(update={"files": sums})
    text = json.dumps(complete.model_dump(mode="json", by_alias=True), indent=1)
    (folder / MANIFEST).write_text(text + "\n")
