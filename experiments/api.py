"""The library API behind the CLI, usable from a notebook::

    from critiquelab.experiments.api import RunOverrides, run
    result = run("experiments/baseline.yaml", overrides=RunOverrides(limit=5))
    result.summary()

    study = load_study("studies/test_half_selection")   # committed results, no data directory
    study.outcomes                                       # one row per arm × seed × problem
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from critiquelab.core.errors import FieldError, UserError
from critiquelab.experiments.costs.estimate import Estimate, estimate_run
from critiquelab.experiments.runner import ExperimentResult, run_experiment
from critiquelab.experiments.spec.experiment import ExperimentSpec, parse_spec
from critiquelab.experiments.spec.files import load_yaml
from critiquelab.experiments.spec.overrides import RunOverrides
from critiquelab.experiments.spec.pipeline_spec import anchored_pipeline_files

if TYPE_CHECKING:
    from critiquelab.experiments.studies.read import Study


def offline_defaults() -> None:
    """Environment defaults for a machine without network: no hub downloads, no LiteLLM
    price-map fetch. Existing values win."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # ChromaDB's telemetry
    # The embedding model's loading bars are noise next to the harness's own progress bar.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # Reading an earlier run's tables (trace sources, compare) is not a download the user asked for.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # A tracking server that stops answering: a few bounded retries, then one line (exit 3),
    # instead of MLflow's default of minutes of retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")


def _source(spec: str | Path | dict[str, Any]) -> str:
    """How errors name a spec: its file, or 'spec' for one given as data."""
    return "spec" if isinstance(spec, dict) else str(spec)


def load_experiment(
    spec: str | Path | dict[str, Any], overrides: RunOverrides | None = None
) -> ExperimentSpec:
    """A spec (a YAML path, or its data as a dict) with ``overrides`` applied, validated once; any
    problem is one :class:`critiquelab.core.errors.UserError` line, naming the option at fault if one is."""
    overrides = overrides or RunOverrides()
    source = _source(spec)
    written = spec if isinstance(spec, dict) else load_yaml(Path(spec))
    if isinstance(written, dict):  # a file pipeline (my_pipes.py:Name) is the spec's file's neighbour
        base = Path.cwd() if isinstance(spec, dict) else Path(spec).parent
        written = anchored_pipeline_files(written, base)
    data = overrides.apply(written) if isinstance(written, dict) else written  # else parse_spec says
    return parse_spec(data, source, blame=lambda error: overrides.blamed(
        error, written, ExperimentSpec.model_validate))


def run(
    spec: str | Path | dict[str, Any],
    *,
    overrides: RunOverrides | None = None,
    home: str | Path | None = None,
    fresh: bool = False,
    cache: bool = True,
    progress: bool = True,
    compare: bool | None = None,
) -> ExperimentResult:
    """Validate a spec (path or dict) with ``overrides`` (what ``critiquelab run``'s options
    change), run it, return the results.

    ``compare`` ends the run with the paired comparison of its pipelines (``result.comparison``);
    by default when it has two or more.
    """
    offline_defaults()
    overrides = overrides or RunOverrides()
    experiment = load_experiment(spec, overrides)
    try:
        return run_experiment(
            experiment, home=Path(home) if home is not None else None, fresh=fresh, cache=cache,
            progress=progress, compare=compare,
        )
    except FieldError as exc:  # a value refused at start-up: blamed on where it came from
        raise overrides.blamed_field(exc, _source(spec)) from exc


def estimate(
    spec: str | Path | dict[str, Any],
    *,
    overrides: RunOverrides | None = None,
    home: str | Path | None = None,
    fresh: bool = False,
) -> Estimate:
    """What :func:`run` with the same arguments would cost, per pipeline × seed: an
    :class:`critiquelab.experiments.costs.estimate.Estimate` (``.table()`` prints as ``run --estimate`` does).
    Calls no model and writes nothing; the spec is checked as ``run`` checks it."""
    offline_defaults()
    overrides = overrides or RunOverrides()
    experiment = load_experiment(spec, overrides)
    try:
        return estimate_run(experiment, Path(home) if home is not None else None, fresh=fresh)
    except FieldError as exc:
        raise overrides.blamed_field(exc, _source(spec)) from exc


def export(
    target: str | Path,
    *,
    formats: Sequence[str] = ("json", "md", "txt"),
    out: Path | None = None,
    home: str | Path | None = None,
    prefix: str | None = None,
) -> dict[str, Any]:
    """Export an optimised program: ``target`` is an export directory / ``program.json``, or the
    id of an MLflow run (in ``home``'s store) that logged one as its ``program`` artifact. The id
    of a plain run exports the prompts its roles were sent (:mod:`critiquelab.experiments.run_export`): a
    child run's pipeline, or, for a parent, one directory per pipeline label under ``out``.

    Files go to ``out`` (default: ``<home>/exports/<run id or directory name>``); ``mlflow`` in
    ``formats`` registers one prompt per role in the Prompt Registry. Returns what was written.
    Formats and ``out`` are checked before anything is read or downloaded.
    """
    from critiquelab.core.lookup import check_lookup
    from critiquelab.experiments.controls import refuse_control_params
    from critiquelab.experiments.paths import check_writable_dir, data_dir
    from critiquelab.experiments.tracking.store import tracking_uri
    from critiquelab.optimizers.export import check_formats, export_program, load_program, register_prompts

    offline_defaults()
    formats = check_formats(formats)
    if out is not None:
        out = check_writable_dir(out, "where the export would go")
    home = Path(home) if home else data_dir()
    if not str(target).strip():  # Path("") is the working directory
        raise UserError("export '': an empty target; give an export directory, a program.json or "
                        "a run id")
    path, run_id = Path(target), ""
    check_lookup(path, f"export '{target}'")
    if not path.exists():
        downloaded = _download_program(home, str(target))
        if downloaded is None:  # a plain run: the prompts its roles were sent, rebuilt
            from critiquelab.experiments.run_export import export_plain_run

            return export_plain_run(home, str(target), formats=formats, out=out, prefix=prefix)
        run_id, path = str(target), downloaded
    program, manifest = load_program(path)
    refuse_control_params(manifest.get("params", {}), str(target), "an export")
    name = run_id or path.resolve().name
    out = out or home / "exports" / name
    files = [f for f in formats if f != "mlflow"]
    written = export_program(
        program, out, pipeline=manifest["pipeline"], params=manifest.get("params", {}),
        formats=files or ["json"], source=run_id or manifest.get("source", ""),
    )
    result: dict[str, Any] = {"files": [str(p) for p in written]}
    if "mlflow" in formats:
        result["prompts"] = register_prompts(
            program, tracking_uri(home), prefix=prefix or f"critiquelab.{manifest['pipeline']}",
            run_id=run_id or manifest.get("source", ""),
        )
    return result


def _download_program(home: Path, run_id: str) -> Path | None:
    """The ``program`` artifact of run ``run_id`` (an optimisation's), downloaded; None if it has none."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from critiquelab.core.errors import UserError
    from critiquelab.experiments.tracking.local_store import require_runs
    from critiquelab.experiments.tracking.store import ServiceClient, tracking_uri
    from critiquelab.pipelines.controls import refuse_control_runs

    uri = tracking_uri(home)
    require_runs(uri, f"export: '{run_id}' is no path, so a run id")
    client = ServiceClient(MlflowClient(tracking_uri=uri), uri)  # a server down: exit 3, not "unknown"
    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        raise UserError(f"'{run_id}' is neither a path nor an MLflow run id in {uri}") from exc
    refuse_control_runs([(run_id, run.data.tags)], "an export")  # before anything is downloaded
    missing = UserError(f"run {run_id}: its 'program' artifact could not be downloaded")
    # Looked up first: downloading a missing artifact draws MLflow's progress bar before failing.
    if not any(a.path == "program" and a.is_dir for a in client.list_artifacts(run_id)):
        return None
    try:
        return Path(client.download_artifacts(run_id, "program"))
    except (MlflowException, OSError) as exc:
        raise missing from exc


def optimize(
    spec: str | Path, *, home: str | Path | None = None, fresh: bool = False, cache: bool = True,
    log: Any = None, progress: bool = False,
) -> Any:
    """Run (or resume) an optimisation spec; returns an ``OptimizeResult``. ``log`` receives a
    line per step; ``progress`` shows a progress bar per program on the held-out test."""
    from critiquelab.experiments.optimize.loop import run_optimization
    from critiquelab.experiments.optimize.spec import load_optimize_spec

    offline_defaults()
    return run_optimization(
        load_optimize_spec(Path(spec)), home=Path(home) if home else None, fresh=fresh, cache=cache,
        log=log or (lambda _: None), source=str(spec), progress=progress,
    )


def list_pipelines(names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every installed pipeline (critiquelab's and plugins'), or only ``names`` (registered names
    or ``module:Name`` / ``file.py:Name`` references; an unknown one is a one-line UserError), as
    ``critiquelab pipelines`` prints them: ``name``, ``summary``, ``roles``, ``figures`` and
    ``params`` — one row per parameter with ``name``, ``type``, ``default``, ``required``,
    ``allowed`` (range or choices) and ``description``, generated from its typed model."""
    from critiquelab.pipelines.registry import describe_pipelines

    return describe_pipelines(names)


def load_study(path: str | Path) -> Study:
    """A committed study folder, checked (a missing or altered file is a one-line UserError):
    ``.outcomes`` is its per-problem DataFrame (one row per arm × seed × problem, the final
    programs included), ``.manifest`` its provenance and evidence status, ``.compare()``
    compare's tables and paired tests re-computed from its files, with no data directory."""
    from critiquelab.experiments.studies.read import load_study as load

    return load(path)


def write_study(
    run_ids: str | Sequence[str], out: str | Path, *, evidence: str, tuned_on: str = "",
    notes: Sequence[str] = (), home: str | Path | None = None, replace: bool = False,
) -> Path:
    """Write the study of finished runs (a parent run id, or pipeline run ids) into the folder
    ``out`` — what ``critiquelab study write`` does. ``evidence``: ``held_out`` or ``in_sample``."""
    from critiquelab.experiments.studies.write import write_study as write

    if evidence not in ("held_out", "in_sample"):
        raise UserError(f"evidence '{evidence}': use held_out or in_sample")
    return write(run_ids, out, evidence="held_out" if evidence == "held_out" else "in_sample",
                 tuned_on=tuned_on, notes=notes, home=Path(home) if home else None, replace=replace)
