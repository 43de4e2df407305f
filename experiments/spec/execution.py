"""Where and how problems are solved: test-run limits, the executor and its Ray settings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from critiquelab.core.config import StrictModel
from critiquelab.pipelines.params import SCHEDULING_ONLY, marked_fields

# Problems in flight: with parallel agents, 4 problems keep llama-server's 8 slots busy on 2 cores
# (benchmarks/job_old_vs_new.py); remote endpoints take it as well.
DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 64  # problems at once, and model calls at once (problems × parallel agents)


class RayOnly:
    """Marks an execution setting (in its ``Annotated`` type) that only the Ray executor reads; set
    under the local executor it is refused rather than ignored."""


RAY_ONLY = RayOnly()


class ExecutionSpec(StrictModel):
    # Fields marked SCHEDULING_ONLY say where problems run, not what they answer: they stay out of
    # the checkpoint key, so a run resumed on another executor (or cluster size) reuses every
    # finished problem.
    timeout_s: float = Field(default=10.0, gt=0, le=600,
                             description="Wall-clock limit in seconds per test run.")
    executor: Annotated[Literal["local", "ray"], SCHEDULING_ONLY] = Field(
        default="local",
        description="Where problems are solved: 'local' (threads in this process) or 'ray' (worker "
        "processes on a Ray cluster; this process stays the driver: checkpoints, pool, MLflow). "
        "Results do not depend on it.",
    )
    address: Annotated[str, SCHEDULING_ONLY, RAY_ONLY] = Field(
        default="auto",
        description="ray only: the cluster to join — 'auto' (the one `ray start` runs on this machine), "
        "host:6379, or ray://host:10001 (Ray Client).",
    )
    max_retries: Annotated[int, SCHEDULING_ONLY, RAY_ONLY] = Field(
        default=3, ge=0, le=20,
        description="ray only: times a problem is resubmitted after the worker solving it was lost "
        "(its node died); beyond that the run stops with exit code 3, resumable.",
    )
    in_flight_per_node: Annotated[int, SCHEDULING_ONLY, RAY_ONLY] = Field(
        default=DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY,
        description="ray only: problems solved at once on each node (split over `workers_per_node`); "
        "`concurrency` stays the limit across the whole cluster.",
    )
    workers_per_node: Annotated[int, SCHEDULING_ONLY, RAY_ONLY] = Field(
        default=1, ge=1, le=MAX_CONCURRENCY,
        description="ray only: worker processes per node (Python threads of one process share a GIL).",
    )
    batch_target_s: Annotated[float, RAY_ONLY] = Field(
        default=0.25, gt=0, le=60,
        description="ray only: work per call to a worker, in seconds; problems go out in batches "
        "sized from the per-problem time measured so far (one at first), so a fast endpoint does "
        "not pay a round trip per problem; a lost worker costs its batch (solved again elsewhere).",
    )
    max_batch: Annotated[int, RAY_ONLY] = Field(
        default=16, ge=1, le=256,
        description="ray only: most problems in one call to a worker (see `batch_target_s`).",
    )
    allow_mixed_isolation: Annotated[bool, SCHEDULING_ONLY, RAY_ONLY] = Field(
        default=False,
        description="ray only: accept nodes whose sandbox runs at another isolation level than the "
        "driver's (bubblewrap / setuid / process); refused by default, since verdicts would differ.",
    )

    @model_validator(mode="after")
    def _workers_share_the_node_limit(self) -> ExecutionSpec:
        if self.in_flight_per_node % self.workers_per_node:
            message = (
                f"in_flight_per_node {self.in_flight_per_node} must be a multiple of workers_per_node "
                f"{self.workers_per_node} (each worker takes an equal share)"
            )
            raise PydanticCustomError("node_share", "{message}", {"message": message})
        return self

    @model_validator(mode="after")
    def _ray_settings_need_ray(self) -> ExecutionSpec:
        # A cluster address or node limit under the local executor would be ignored without a word.
        # Values equal to the default change nothing (a logged config.yaml spells every field out).
        ray_only = sorted(name for name in marked_fields(type(self), RAY_ONLY)
                          if getattr(self, name) != type(self).model_fields[name].default)
        if self.executor == "local" and ray_only:
            message = (f"{', '.join(ray_only)}: Ray settings, ignored by executor 'local'; set "
                       "executor: ray (or pass --ray ADDRESS), or leave them out")
            raise PydanticCustomError("ray_only", "{message}", {"message": message})
        return self
