"""The ``memory:`` option of a pipeline in an experiment spec."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_COLLECTION = "critiquelab_memory"
# A memory store is a Chroma collection: the names Chroma takes (and nothing that reads as a path).
STORE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,60}[A-Za-z0-9]$")
RecordedType = Literal["error_pattern", "review_feedback", "decision_outcome", "code_pattern"]
RECORDED_TYPES: tuple[RecordedType, ...] = (
    "error_pattern", "review_feedback", "decision_outcome", "code_pattern",
)
# Who benefits from whose lessons: a critic's findings are about code the coder and fixer write.
DEFAULT_SHARE_TO: dict[str, list[str]] = {
    "critic": ["coder", "fixer"], "coder": ["fixer"], "fixer": ["coder"],
}


class MemoryConfig(BaseModel):
    """Episodic memory, skills and sharing for one pipeline. Off unless ``enabled``; when off,
    the pipeline's prompts are exactly those of a run without memory."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    enabled: bool = Field(
        default=False, description="Recall memories into prompts and reflect after each task."
    )
    k: int = Field(default=3, ge=1, le=20, description="Episodic entries injected into one role call.")
    skills_k: int = Field(default=2, ge=0, le=20, description="Skills injected into one role call.")
    skills_max_distance: float = Field(
        default=1.0, gt=0, le=2,
        description="Skills farther than this cosine distance (MiniLM) from the task are not "
        "injected; the rest go nearest first, most confident among equally near ones. With MiniLM "
        "a skill about a similar task sits under about 0.7 from its prompt, a general lesson 0.8 to "
        "1.0; 1.0 (orthogonal) drops only skills pointing away from the task.",
    )
    roles: list[str] = Field(
        default_factory=lambda: ["coder", "fixer"],
        description="Roles whose signature gets the `memories` input field (by signature: coder, "
        "fixer, critic, debater, judge, meta_critic, self_feedback).",
    )
    approval: Literal["manual", "auto"] = Field(
        default="manual",
        description="manual: skills and entries shared to other roles reach prompts only after "
        "`critiquelab memory approve`; auto: at once.",
    )
    share_to: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_SHARE_TO.items()},
        description="Role -> roles that may benefit from its entries (each share is a proposal).",
    )
    store: str = Field(
        default=DEFAULT_COLLECTION, pattern=STORE_NAME.pattern,
        description="Chroma collection (and skills/proposals namespace) of this memory.",
    )
    scope: Literal["run", "all"] = Field(
        default="run",
        description="run: recall only what this pipeline × seed run wrote (plus `warm_start`), so "
        "results do not depend on earlier experiments; all: everything in the store.",
    )
    reflect: bool = Field(default=True, description="Reflect on each finished task (one reflector call).")
    record: list[RecordedType] = Field(
        default_factory=lambda: list(RECORDED_TYPES),
        description="Entries taken from each finished task's thread besides the reflection (no LM "
        "call): error_pattern (finding -> revision -> visible outcome), review_feedback (reviews "
        "asking for changes), decision_outcome (a role's decision — fixer's revision, critic's or "
        "reviewer's verdict, judge's choice, architect's retry/reassign/abort, QA engineer's pass/"
        "fail — and how the code it led to did on the visible examples), code_pattern (final code "
        "that passed every visible example).",
    )
    promote_after: int = Field(
        default=3, ge=2, description="Similar episodic entries (this one included) that make a skill."
    )
    promote_distance: float = Field(
        default=0.35, gt=0, le=2,
        description="Cosine distance under which two entries count as the same pattern for promotion.",
    )
    consolidate: bool = Field(default=False, description="Consolidate the store at the end of the run.")
    warm_start: str | None = Field(
        default=None,
        description="Run id whose memory is recalled too; refused when this run's problems overlap "
        "the problems that run learned on (unless allow_overlap).",
    )
    allow_overlap: bool = Field(
        default=False, description="Allow scoring on problems the warm-start memory was built on."
    )
