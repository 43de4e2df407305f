"""The two kinds of step an optimisation is made of.

A :class:`RunStep` is its own MLflow child run of the optimisation's parent run (its params logged
on it, its record's numbers as metrics); the gate, a plain :class:`Step`, decides on the parent
run. Either way a step's record is saved when it finishes, and read back instead of running it
again when the optimisation is re-run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic

from critiquelab.experiments.optimize.context import OptimizeContext
from critiquelab.experiments.optimize.records import RecordT, RunRecordT
from critiquelab.experiments.optimize.served_models import ModelRole
from critiquelab.experiments.optimize.spec import OptimizeSpec


class Step(ABC, Generic[RecordT]):
    """One step: its record read back if it finished earlier, else made now and saved."""

    name: str  # of its record file, its MLflow run and its log lines
    record_type: type[RecordT]

    def models(self, spec: OptimizeSpec) -> frozenset[ModelRole]:
        """The LMs this step may ask for; each is stopped after the last step that may."""
        return frozenset()

    @abstractmethod
    def resume(self, ctx: OptimizeContext) -> RecordT:
        """This step's record, read back or made now."""


class RunStep(Step[RunRecordT]):
    """A step run as an MLflow child run of the parent. A step killed (or failing) marks its run
    KILLED and saves nothing: the re-run runs it again."""

    @abstractmethod
    def params(self, ctx: OptimizeContext) -> dict[str, Any]:
        """What the step's MLflow run logs as its params."""

    @abstractmethod
    def run(self, ctx: OptimizeContext, run_id: str) -> RunRecordT:
        """Do the step's work under MLflow run ``run_id``; the record of it."""

    def resume(self, ctx: OptimizeContext) -> RunRecordT:
        done = ctx.store.load(self.name, self.record_type)
        if done is not None:
            ctx.log(f"{self.name}: already done (run {done.run_id})")
            return done
        ctx.log(f"{self.name}: running")
        run_id = ctx.tracker.start_run(self.name, parent_id=ctx.parent_run_id)
        ctx.tracker.log_params(run_id, self.params(ctx))
        try:
            record = self.run(ctx, run_id)
        except BaseException:
            ctx.tracker.finish(run_id, "KILLED")
            raise
        ctx.tracker.log_metrics(run_id, record.metrics())
        ctx.tracker.finish(run_id)
        ctx.store.save(self.name, record)
        return record
