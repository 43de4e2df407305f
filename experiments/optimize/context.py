"""What the steps of an optimisation share: the spec and data, where to log, what finished so far."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from critiquelab.eval.problems import Problem
from critiquelab.experiments.optimize.records import (
    CompileRecord,
    GateRecord,
    HeldOutRecord,
    Record,
    RecordT,
    RefineRecord,
    ScoredRecord,
    StepStore,
)
from critiquelab.experiments.optimize.served_models import ServedModels
from critiquelab.experiments.optimize.spec import OptimizeSpec
from critiquelab.experiments.tracking.store import Tracker
from critiquelab.optimizers.splits import Split


class Finished:
    """The records of the steps finished so far (run now or read back), in step order, each read
    by its step's name as its own type."""

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}

    def add(self, name: str, record: Record) -> None:
        self._records[name] = record

    def _get(self, name: str, kind: type[RecordT]) -> RecordT:
        record = self._records.get(name)
        if not isinstance(record, kind):  # a step read a record before its step ran: a bug of ours
            raise RuntimeError(f"optimize: step {name!r} has not finished")
        return record

    @property
    def baseline_val(self) -> ScoredRecord:
        return self._get("baseline_val", ScoredRecord)

    @property
    def compile(self) -> CompileRecord:
        return self._get("compile", CompileRecord)

    @property
    def compiled_val(self) -> ScoredRecord:
        return self._get("compiled_val", ScoredRecord)

    @property
    def gate(self) -> GateRecord:
        return self._get("gate", GateRecord)

    @property
    def refine(self) -> RefineRecord | None:
        """None when the spec has no refine step."""
        return self._get("refine", RefineRecord) if "refine" in self._records else None

    @property
    def test(self) -> HeldOutRecord:
        return self._get("test", HeldOutRecord)

    @property
    def kept(self) -> str:
        """The program the gates kept: ``refined``, ``compiled`` or ``baseline``."""
        refine = self.refine
        return "refined" if refine is not None and refine.kept else self.gate.kept

    def saved(self) -> dict[str, dict[str, Any]]:
        """Each record as its file holds it, by step name."""
        return {name: record.saved() for name, record in self._records.items()}


@dataclass
class OptimizeContext:
    """One optimisation's shared state, handed to every step."""

    spec: OptimizeSpec
    home: Path  # the data directory: MLflow store, LM cache, bundled models
    directory: Path  # this optimisation's own: step records, optimiser state, exported programs
    store: StepStore
    split: Split
    problems: dict[str, Problem]  # the dataset, by task id
    tracker: Tracker
    parent_run_id: str
    models: ServedModels
    log: Callable[[str], None]  # a line per step (the CLI prints them on stderr)
    cache: bool  # LM and TextGrad replies cached on disk
    progress: bool  # a progress bar per program on the held-out test
    finished: Finished = field(default_factory=Finished)

    def problems_of(self, task_ids: Iterable[str]) -> list[Problem]:
        return [self.problems[task_id] for task_id in task_ids]
