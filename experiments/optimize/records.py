"""What each finished step of ``critiquelab optimize`` saved, and where.

A step's record is ``<optimisation directory>/steps/<name>.json``: a re-run reads it back instead
of running the step again. The files are plain JSON objects (sorted keys, NaN for a score of no
problem), read back exactly as written, so a record made by an earlier version of this code still
resumes: a field that version did not write stays absent (``changed_roles``, say).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    """A finished step's record. Keys it does not know are kept, so reading and saving a record
    never loses what another version wrote."""

    model_config = ConfigDict(extra="allow")

    def saved(self) -> dict[str, Any]:
        """The record as its JSON file holds it (and ``OptimizeResult.steps`` shows it): the fields
        it was made or read with, NaN kept as NaN."""
        return self.model_dump(exclude_unset=True)


class RunRecord(Record):
    """The record of a step that ran as its own MLflow run (or of the parent run itself)."""

    run_id: str = Field(description="The MLflow run of the step.")

    def metrics(self) -> dict[str, float]:
        """The record's numbers (floats; not flags, not lists), logged as the run's metrics."""
        return {key: value for key, value in self.saved().items() if isinstance(value, float)}


class ScoredRecord(RunRecord):
    """``baseline_val`` / ``compiled_val``: a program's hidden-test verdicts on the validation split."""

    pass_at_1: float = Field(description="Share of the split's problems passed; NaN for no problem.")
    scores: dict[str, bool] = Field(description="Passed or not, by task id.")


class CompileRecord(RunRecord):
    """``compile``: the optimised program, exported. The compiler's own figures (``failed_proposals``,
    ``demos_dropped.<role>``, ``train_metric_mean``) are further float fields of the same name."""

    __pydantic_extra__: dict[str, float] = Field(init=False)

    program_dir: str = Field(description="Directory of the exported compiled program.")
    traces: float = Field(description="Pool traces the optimiser learned from (0 unless 'traces').")
    demos: float = Field(description="Demos in the compiled program, over all roles.")
    changed_roles: list[str] | None = Field(
        default=None, description="Roles whose prompt compile changed; absent (None) in a record of a "
        "version that did not write it, taken as changed.",
    )

    @property
    def changed_nothing(self) -> bool:
        """Whether compile changed no prompt: the compiled program is the original, so it is neither
        kept nor tested."""
        return self.changed_roles == []


class GateRecord(Record):
    """The validation gate's decision, made on the parent run (no run of its own)."""

    kept: Literal["compiled", "baseline"] = Field(description="The program the gate kept.")
    program_dir: str = Field(description="The kept compiled program's directory; '' when the baseline.")
    baseline_val: float = Field(description="Validation pass@1 of the unoptimised pipeline.")
    compiled_val: float = Field(description="Validation pass@1 of the compiled program.")
    reason: str = Field(description="Why it kept what it kept, in words (also the parent's tag).")


class RefineRecord(RunRecord):
    """``refine``: TextGrad's instruction for one role of the gate's program, and its own gate."""

    kept: bool = Field(description="Whether the refined program replaced the gate's.")
    program_dir: str = Field(description="The refined program's directory when kept, else ''.")
    candidate_dir: str = Field(description="The refined candidate's directory, kept or not; '' when "
                               "TextGrad left the instruction as it was.")
    val_before: float = Field(description="Validation pass@1 of the program refined.")
    val_after: float = Field(description="Validation pass@1 of the refined candidate.")
    instruction_after: str = Field(description="The candidate's instruction for the role.")
    reason: str = Field(description="Why the refine gate kept or rejected the candidate.")


class HeldOutRecord(RunRecord):
    """``test``: the held-out verdict, every candidate beside the unoptimised pipeline."""

    pass_at_1: float = Field(description="Test pass@1 of the kept program (the optimisation's score).")
    unoptimised_pass_at_1: float = Field(description="Test pass@1 of the unoptimised pipeline.")
    scores: dict[str, bool] = Field(description="The kept program's verdicts, by task id.")
    candidates_pass_at_1: dict[str, float] = Field(description="Test pass@1 by pipeline label.")
    experiment_run_id: str = Field(description="The parent run of the test experiment.")
    comparison: str = Field(description="compare's table and paired tests, as Markdown.")


RecordT = TypeVar("RecordT", bound=Record)
RunRecordT = TypeVar("RunRecordT", bound=RunRecord)


class StepStore:
    """Finished steps on disk, one JSON file each: a step whose file exists is not run again."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory  # made with the first record: a refused start writes nothing

    def _path(self, name: str) -> Path:
        return self.directory / "steps" / f"{name}.json"

    def has(self, name: str) -> bool:
        """Whether step ``name`` finished (its record is on disk)."""
        return self._path(name).exists()

    def load(self, name: str, kind: type[RecordT]) -> RecordT | None:
        """Step ``name``'s record, if it finished."""
        path = self._path(name)
        return kind.model_validate(json.loads(path.read_text())) if path.exists() else None

    def save(self, name: str, record: Record) -> None:
        """Write atomically: a kill mid-write leaves no half record that would read as finished."""
        tmp = self._path(name).with_suffix(".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(record.saved(), indent=2, sort_keys=True))
        tmp.replace(self._path(name))
