"""Opening the executor a spec names; the executors themselves are imported only when chosen (Ray
is a heavy import)."""

from __future__ import annotations

from pathlib import Path

from critiquelab.experiments.executors.job import Executor
from critiquelab.experiments.spec.experiment import ExperimentSpec


def open_executor(spec: ExperimentSpec, home: Path) -> Executor:
    """The executor the spec's ``execution.executor`` names (nothing is started yet)."""
    if spec.execution.executor == "ray":
        from critiquelab.experiments.executors.ray_cluster import (
            RayExecutor,  # imports Ray only when asked for
        )

        return RayExecutor(spec, home)
    from critiquelab.experiments.executors.local import LocalExecutor

    return LocalExecutor(spec.concurrency)
