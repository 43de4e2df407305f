"""MLflow logging through an explicit client (no fluent active-run state shared across threads).

The store is SQLite under the data directory; artifacts sit beside it. Parent run = one
experiment invocation; child run = one pipeline × seed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from critiquelab.core.errors import ServiceError, UserError, error_line
from critiquelab.experiments.paths import path_segment
from critiquelab.experiments.tracking.uris import USE, tracking_uri_problem

PARENT_TAG = "mlflow.parentRunId"
CHILD_TAG = "critiquelab.child"  # "<label>/seed=<n>": set when a child run is created
INVOCATION_TAG = "critiquelab.invocation"  # configuration × problems × seeds of a parent run
RESULTS_TAG = "critiquelab.results_sha256"  # set last: the child's results are all logged
# a child's warnings (critiquelab.experiments.run_warnings), a line each
WARNINGS_TAG = "critiquelab.warnings"

_MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
_BATCH = 100  # MLflow's limit on params per log_batch call


def tracking_uri(data_dir: Path, explicit: str | None = None) -> str:
    """Where runs are logged: ``explicit`` (a spec's ``tracking.uri``), else
    ``$MLFLOW_TRACKING_URI`` (a team's tracking server), else SQLite under the data directory."""
    if explicit:
        return explicit  # checked with the spec
    from_env = os.environ.get("MLFLOW_TRACKING_URI")
    if from_env:
        problem = tracking_uri_problem(from_env)
        if problem:
            raise UserError(f"$MLFLOW_TRACKING_URI '{from_env}': {problem}; {USE}")
        return from_env
    return f"sqlite:///{data_dir / 'mlflow.db'}"


def is_server(uri: str) -> bool:
    """A tracking server (it decides where artifacts go), not a database file of ours."""
    return uri.split(":", 1)[0] in ("http", "https", "databricks")


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> ``{"model.id": "local", ...}`` with JSON for lists."""
    flat: dict[str, str] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
            flat[name] = text[:_MAX_PARAM_LENGTH]
    return flat


def child_key(run: Any) -> str:
    """``<label>/seed=<n>`` of a pipeline run: its tag, or its params for runs logged before the
    tag existed."""
    tagged = run.data.tags.get(CHILD_TAG)
    if tagged:
        return str(tagged)
    params = run.data.params
    return f"{params.get('pipeline.label', '')}/seed={params.get('seed', '')}"


def most_complete(runs: Sequence[Any]) -> Any:
    """Of several runs of one pipeline × seed, the one that holds the most: most problems, then
    finished before unfinished, then the latest."""
    return max(runs, key=lambda r: (
        r.data.metrics.get("problems", 0.0), r.info.status == "FINISHED", r.info.end_time or 0,
        r.info.start_time or 0,
    ))


class ServiceClient:
    """An ``MlflowClient`` whose calls to a tracking server that stopped answering raise
    :class:`ServiceError` (one line, exit code 3, resumable) instead of a traceback. Answers such
    as "no such run" stay ``MlflowException``s for the caller to interpret."""

    def __init__(self, client: Any, uri: str) -> None:
        self._client, self._uri = client, uri
        self.tracking_uri = uri

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except Exception as exc:
                if _unreachable(exc):
                    first = error_line(exc)
                    raise ServiceError(f"MLflow tracking store {self._uri} failed mid-run: {first}") from exc
                raise

        return call


def _unreachable(exc: Exception) -> bool:
    """The store did not answer (connection refused or reset, timeout, HTTP 5xx), as opposed to
    answering that something does not exist or is invalid."""
    import requests
    from mlflow.exceptions import MlflowException

    if isinstance(exc, requests.exceptions.RequestException | ConnectionError | TimeoutError):
        return True
    # MLflow's REST client says "API request to … failed" for both, after its own retries.
    return isinstance(exc, MlflowException) and str(exc).startswith("API request to")


def _experiment_named(client: ServiceClient, name: str) -> Any:
    """The experiment called ``name`` (None if there is none); a store that does not answer is
    bad input here, before anything ran."""
    try:
        return client.get_experiment_by_name(name)
    except ServiceError as exc:
        raise UserError(str(exc).replace("failed mid-run", "is not usable")) from exc


def check_tracking_server(uri: str, experiment_name: str) -> None:
    """A tracking server that does not answer refuses the start before anything is started or
    written (a read, nothing created on the server); a database file of ours needs no check."""
    if is_server(uri):
        from mlflow.tracking import MlflowClient

        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
        _experiment_named(ServiceClient(MlflowClient(tracking_uri=uri), uri), experiment_name)


class Tracker:
    """Thin wrapper over ``MlflowClient`` bound to one experiment."""

    def __init__(self, data_dir: Path, experiment_name: str, uri: str | None = None) -> None:
        """``uri``: an explicit tracking URI; default :func:`tracking_uri`'s choice."""
        self._open: list[str] = []  # runs started or reopened here and not finished yet
        # MLflow logs its database migrations at INFO on first use; they are noise to a user.
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
        from mlflow.tracking import MlflowClient

        self.uri = tracking_uri(data_dir, uri)
        if not is_server(self.uri):
            data_dir.mkdir(parents=True, exist_ok=True)
        self.client = ServiceClient(MlflowClient(tracking_uri=self.uri), self.uri)
        existing = _experiment_named(self.client, experiment_name)
        if existing is not None:
            self.experiment_id = existing.experiment_id
        elif is_server(self.uri):  # the server stores the artifacts where it is configured to
            self.experiment_id = self.client.create_experiment(experiment_name)
        else:
            artifacts = (data_dir / "mlartifacts" / path_segment(experiment_name)).resolve().as_uri()
            self.experiment_id = self.client.create_experiment(
                experiment_name, artifact_location=artifacts
            )

    def start_run(
        self, name: str, parent_id: str | None = None, tags: Mapping[str, str] | None = None
    ) -> str:
        all_tags = dict(tags or {})
        if parent_id:
            all_tags[PARENT_TAG] = parent_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        self._open.append(str(run.info.run_id))
        return str(run.info.run_id)

    def runs_tagged(self, tags: Mapping[str, str]) -> list[Any]:
        """Live runs of this experiment carrying every one of ``tags``, newest first."""
        clauses = " and ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items())
        return list(self.client.search_runs(
            [self.experiment_id], filter_string=clauses, max_results=10000,
            order_by=["attributes.start_time DESC"],
        ))

    def reopen(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")
        self._open.append(run_id)

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        existing = self.client.get_run(run_id).data.params
        fresh = [
            Param(k, str(v)[:_MAX_PARAM_LENGTH]) for k, v in params.items() if k not in existing
        ]
        for start in range(0, len(fresh), _BATCH):
            self.client.log_batch(run_id, params=fresh[start : start + _BATCH])

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float], step: int = 0, *, only_changed: bool = False
    ) -> None:
        """Log ``metrics`` at ``step``. ``only_changed`` skips those whose latest value is already
        the same, so logging a resumed run again does not repeat its history."""
        from mlflow.entities import Metric
        from mlflow.utils.time import get_current_time_millis

        now = get_current_time_millis()
        logged = self.client.get_run(run_id).data.metrics if only_changed else {}
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if logged.get(k) != float(v)]
        for start in range(0, len(batch), _BATCH):
            self.client.log_batch(run_id, metrics=batch[start : start + _BATCH])

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(run_id, key, value)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, text, artifact_file)

    def log_frame(self, run_id: str, frame: Any, stem: str) -> None:
        """A pandas DataFrame as ``{stem}.parquet`` and ``{stem}.csv`` artifacts."""
        with tempfile.TemporaryDirectory() as tmp:
            frame.to_parquet(Path(tmp) / f"{stem}.parquet", index=False)
            frame.to_csv(Path(tmp) / f"{stem}.csv", index=False)
            self.client.log_artifact(run_id, str(Path(tmp) / f"{stem}.parquet"))
            self.client.log_artifact(run_id, str(Path(tmp) / f"{stem}.csv"))

    def finish(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status=status)
        while run_id in self._open:
            self._open.remove(run_id)

    def kill_open_runs(self) -> None:
        """Mark every run this tracker started or reopened and has not finished KILLED, newest
        first: an interrupt may land between a run's creation and the code that would finish it."""
        for run_id in reversed(list(dict.fromkeys(self._open))):
            self.finish(run_id, "KILLED")
