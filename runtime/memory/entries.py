"""An episodic memory entry and its flat Chroma record."""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field

# ``demo``: a verified demonstration (a task's prompt and final code that passed its visible
# examples), given to roles as DSPy demos, never as text (critiquelab.runtime.memory.demos).
MemoryType = Literal[
    "reflection", "error_pattern", "review_feedback", "decision_outcome", "code_pattern", "demo",
]
MEMORY_TYPES: tuple[str, ...] = (
    "reflection", "error_pattern", "review_feedback", "decision_outcome", "code_pattern", "demo",
)
AUDIENCE_PREFIX = "for_"  # boolean metadata key per role allowed to recall the entry

# Task tags from the prompt's words: coarse problem families, so recall can be filtered by kind.
_TAG_WORDS = {
    "string": ("string", "str", "char", "substring", "vowel", "palindrome", "word"),
    "list": ("list", "array", "element", "sequence"),
    "math": ("prime", "sum", "product", "digit", "number", "integer", "divisible", "factor"),
    "sorting": ("sort", "sorted", "order", "ascending", "descending"),
    "dict": ("dict", "dictionary", "key"),
    "parsing": ("parse", "bracket", "parenthes", "brackets"),
}


def task_tags(prompt: str) -> list[str]:
    """Problem-family tags of a prompt (its docstring words), sorted."""
    words = set(re.findall(r"[a-z]+", prompt.lower()))
    return sorted(tag for tag, keys in _TAG_WORDS.items() if any(w.startswith(keys) for w in words))


class MemoryEntry(BaseModel):
    """One thing an agent learned on one task."""

    id: str = Field(default_factory=lambda: f"m-{uuid.uuid4().hex[:12]}", description="Entry id.")
    role: str = Field(description="The agent role the entry is about (coder, critic, fixer …).")
    type: MemoryType = Field(description="reflection, error_pattern, review_feedback, …")
    task_id: str = Field(description="The task it was learned on.")
    run_id: str = Field(default="", description="The run (MLflow child run) that wrote it.")
    tags: list[str] = Field(default_factory=list, description="Task type tags.")
    content: str = Field(description="The lesson or pattern, as injected into prompts.")
    context: dict[str, Any] = Field(default_factory=dict, description="Structured context (JSON).")
    audience: list[str] = Field(default_factory=list, description="Roles that may recall it.")
    created_at: float = Field(default_factory=time.time)
    last_retrieved: float = Field(default=0.0, description="Unix time of the last recall; 0 never.")
    retrieval_count: int = Field(default=0)
    deprecated: bool = Field(default=False, description="Merged into another or decayed.")


def to_record(entry: MemoryEntry) -> tuple[str, str, dict[str, str | int | float | bool]]:
    """``(id, document, metadata)``; audience roles become ``for_<role>: True`` keys so Chroma can
    filter on them."""
    metadata: dict[str, str | int | float | bool] = {
        "role": entry.role, "type": entry.type, "task_id": entry.task_id, "run_id": entry.run_id,
        "tags": json.dumps(entry.tags), "context": json.dumps(entry.context, default=str),
        "created_at": entry.created_at, "last_retrieved": entry.last_retrieved,
        "retrieval_count": entry.retrieval_count, "deprecated": entry.deprecated,
    }
    for role in entry.audience:
        metadata[f"{AUDIENCE_PREFIX}{role}"] = True
    return entry.id, entry.content, metadata


def from_record(entry_id: str, document: str | None, metadata: dict[str, Any]) -> MemoryEntry:
    audience = sorted(
        key[len(AUDIENCE_PREFIX):] for key, value in metadata.items()
        if key.startswith(AUDIENCE_PREFIX) and value
    )
    return MemoryEntry(
        id=entry_id, role=str(metadata["role"]), type=metadata["type"], task_id=str(metadata["task_id"]),
        run_id=str(metadata.get("run_id", "")), tags=json.loads(metadata.get("tags") or "[]"),
        content=document or "", context=json.loads(metadata.get("context") or "{}"), audience=audience,
        created_at=float(metadata["created_at"]), last_retrieved=float(metadata.get("last_retrieved", 0.0)),
        retrieval_count=int(metadata.get("retrieval_count", 0)), deprecated=bool(metadata.get("deprecated")),
    )
