"""What the viewer shows, read from the tracking store: experiments, runs, per-problem results
and each problem's pool messages.

A finished child run has ``problems.parquet`` and ``messages.jsonl``; a run still in progress
has neither yet, so its problems and messages are read back from the per-problem traces the
runner logs as each problem finishes (:mod:`critiquelab.experiments.tracking.traces`). Either way a problem
is the runner's own :class:`~critiquelab.eval.results.ProblemResult` (the table read back by
:func:`~critiquelab.eval.results.results_from_table`, the trace's copy validated as it is). Nothing is ever
written.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.eval.results import ProblemResult, results_from_table
from critiquelab.experiments.controls import control_of_run, marked_label
from critiquelab.experiments.tracking.store import CHILD_TAG, PARENT_TAG, child_key
from critiquelab.experiments.tracking.traces import MESSAGE_ATTRIBUTE, RESULT_ATTRIBUTE, run_traces
from critiquelab.runtime.pool.messages import Message


@dataclass
class RunInfo:
    """One MLflow run as the viewer lists it; ``label``/``seed`` only for pipeline runs."""

    run_id: str
    name: str
    experiment: str
    parent_id: str
    status: str
    start_time: int
    label: str = ""
    seed: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    pipeline: str = ""  # the registered pipeline a pipeline run ran (its roles name its agents' calls)

    @property
    def running(self) -> bool:
        return self.status == "RUNNING"


class ViewerData:
    """Read-only access to one tracking store. Finished runs' artifacts are read once and kept;
    runs in progress are read again on every request, so a refresh shows new problems."""

    def __init__(self, uri: str) -> None:
        from mlflow.tracing.client import TracingClient
        from mlflow.tracking import MlflowClient

        # Per-file download progress bars would print on every page a finished run is first read for.
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        self.uri = uri
        self._client = MlflowClient(tracking_uri=uri)
        self._traces = TracingClient(uri)
        self._cache: dict[str, tuple[list[ProblemResult], dict[str, list[Message]]]] = {}
        self._lock = threading.Lock()

    def _info(self, run: Any, experiment: str) -> RunInfo:
        tags = run.data.tags
        is_child = CHILD_TAG in tags or "pipeline.label" in run.data.params
        label, _, seed = child_key(run).partition("/seed=") if is_child else ("", "", "")
        label = marked_label(label, control_of_run(tags))  # a positive control reads as one here too
        return RunInfo(
            run_id=run.info.run_id, name=run.info.run_name or run.info.run_id, experiment=experiment,
            parent_id=tags.get(PARENT_TAG, ""), status=run.info.status,
            start_time=int(run.info.start_time or 0), label=label, seed=seed,
            metrics=dict(run.data.metrics), pipeline=run.data.params.get("pipeline", ""),
        )

    def runs(self) -> list[RunInfo]:
        """Every run of every experiment, newest first."""
        found: list[RunInfo] = []
        for experiment in self._client.search_experiments():
            token = None
            while True:
                page = self._client.search_runs(
                    [experiment.experiment_id], max_results=1000, page_token=token,
                    order_by=["attributes.start_time DESC"],
                )
                found.extend(self._info(run, experiment.name) for run in page)
                token = page.token
                if not token:
                    break
        return found

    def run(self, run_id: str) -> RunInfo:
        from mlflow.exceptions import MlflowException

        try:
            run = self._client.get_run(run_id)
        except MlflowException as exc:
            raise UserError(f"run '{run_id}': no such run in {self.uri}") from exc
        return self._info(run, self._client.get_experiment(run.info.experiment_id).name)

    def _load(self, run_id: str) -> tuple[list[ProblemResult], dict[str, list[Message]]]:
        import pandas as pd

        with self._lock:
            if run_id in self._cache:
                return self._cache[run_id]
        info = self.run(run_id)
        if info.running:
            return self._from_traces(run_id)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                table = self._client.download_artifacts(run_id, "problems.parquet", tmp)
            except Exception:  # killed before its artifacts: what its traces hold
                return self._from_traces(run_id)
            problems = results_from_table(pd.read_parquet(table))
            messages: dict[str, list[Message]] = {}
            try:
                log = Path(self._client.download_artifacts(run_id, "messages.jsonl", tmp))
                for line in log.read_text().splitlines():
                    if line.strip():
                        message = Message.model_validate_json(line)
                        messages.setdefault(message.task_id, []).append(message)
            except Exception:  # logged before message logs existed: results only
                messages = {}
        loaded = (problems, messages)
        with self._lock:
            self._cache[run_id] = loaded
        return loaded

    def _from_traces(self, run_id: str) -> tuple[list[ProblemResult], dict[str, list[Message]]]:
        problems: list[ProblemResult] = []
        messages: dict[str, list[Message]] = {}
        for trace in run_traces(self._traces, run_id):
            for span in trace.data.spans:
                if span.parent_id is None and span.get_attribute(RESULT_ATTRIBUTE):
                    problems.append(ProblemResult.model_validate(span.get_attribute(RESULT_ATTRIBUTE)))
                elif span.get_attribute(MESSAGE_ATTRIBUTE):
                    message = Message.model_validate(span.get_attribute(MESSAGE_ATTRIBUTE))
                    messages.setdefault(message.task_id, []).append(message)
        for found in messages.values():
            found.sort(key=lambda m: m.created_at)
        return problems, messages

    def problems(self, run_id: str) -> list[ProblemResult]:
        return self._load(run_id)[0]

    def problem(self, run_id: str, task_id: str) -> tuple[ProblemResult, list[Message]]:
        problems, messages = self._load(run_id)
        match = next((p for p in problems if p.task_id == task_id), None)
        if match is None:
            raise UserError(f"run '{run_id}' has no problem '{task_id}'")
        return match, messages.get(task_id, [])


def json_text(value: Any) -> str:
    """Metadata as readable JSON (the viewer escapes it like every other model-written string)."""
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def message_trace(message: Message) -> dict[str, Any]:
    """The role call a message records (inputs, exchanges, usage, latency); empty if none."""
    return message.metadata.get("trace") or {}
