"""The fence around positive controls (``critiquelab.pipelines.controls``): the one kind of run whose prompts
carry hidden-test text is named as a control wherever it is shown and kept out of everything
that learns or ships prompts.

- memory: a control is refused together with an enabled ``memory:`` block (its messages would
  become entries recalled by later tasks);
- optimisation: an optimisation spec whose pipeline has a control is refused, and so is a control
  run named as a trace source (an experiment's control runs are never collected as traces);
- export: a control run's prompts are refused.

Every refusal is one :class:`~critiquelab.core.errors.UserError` line (exit 2) raised before anything is
written. Labels of control runs carry :func:`marked_label`'s marker wherever they are listed (run's
table, compare's Controls block, the viewer); compare draws no control in its plots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.pipelines.controls import (
    CONTROL_TAG,
    NO_CONTROL,
    WHY_FENCED,
    control_of,
    refuse_control_runs,
)
from critiquelab.runtime.memory.config import MemoryConfig


def marked_label(label: str, control: str) -> str:
    """How a control run's label is shown (tables, plots, progress): never as a plain arm."""
    return f"{label} [control: {control}]" if control and control != NO_CONTROL else label


def memory_refusal(name: str, params: object, memory: MemoryConfig | None) -> str | None:
    """Why pipeline entry ``name`` may not run (a control with memory on), or None."""
    control = control_of(params)
    if control == NO_CONTROL or memory is None or not memory.enabled:
        return None
    return (f"pipeline '{name}': params.control: the {control} control is refused with memory: {WHY_FENCED}, "
            "which must never enter a memory store")


def optimisation_refusal(name: str, params: object) -> str | None:
    """Why pipeline ``name`` may not be optimised (its params ask for a control), or None."""
    control = control_of(params)
    if control == NO_CONTROL:
        return None
    return (f"pipeline '{name}': params.control: the {control} control cannot be optimised: {WHY_FENCED}, "
            "which must never reach a compiled program")


def control_of_run(tags: Mapping[str, str]) -> str:
    """The control an MLflow run was (its :data:`CONTROL_TAG`), or '' for an ordinary run."""
    return tags.get(CONTROL_TAG, "")


def refuse_control_trace_sources(
    run_ids: Sequence[str], home: Path, tracking: str | None, experiment: str | None = None
) -> None:
    """An optimisation's ``traces.run_ids`` (and ``traces.experiment``), checked before anything
    is written: a control run, an id the store does not hold or an experiment it does not have
    is one line. (An experiment's control runs are left out when its runs are collected.)"""
    if not run_ids and experiment is None:
        return
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from critiquelab.experiments.tracking.local_store import require_runs
    from critiquelab.experiments.tracking.store import ServiceClient, tracking_uri

    uri = tracking_uri(home, tracking)
    require_runs(uri, f"traces.run_ids: run '{run_ids[0]}'" if run_ids
                 else f"traces.experiment: experiment '{experiment}'")
    client = ServiceClient(MlflowClient(tracking_uri=uri), uri)  # a server down: exit 3, not "unknown"
    if experiment is not None and client.get_experiment_by_name(experiment) is None:
        raise UserError(f"traces.experiment: no MLflow experiment named '{experiment}' in "
                        f"{client.tracking_uri}")
    tags = []
    for run_id in run_ids:
        try:
            tags.append((run_id, client.get_run(run_id).data.tags))
        except MlflowException as exc:
            raise UserError(f"traces.run_ids: unknown run id '{run_id}' in {client.tracking_uri}") from exc
    refuse_control_runs(tags, "a trace source")


def refuse_control_params(params: Mapping[str, Any], source: str, use: str) -> None:
    """:class:`UserError` if the params an exported program records (a manifest's) ask for a
    control — refused as ``use``."""
    control = params.get("control", NO_CONTROL)
    if control != NO_CONTROL:
        raise UserError(f"{source}: the pipeline ran as the {control} control: {WHY_FENCED}, "
                        f"so it is refused as {use}")
