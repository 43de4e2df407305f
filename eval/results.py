"""The per-problem record every pipeline run produces, and the table built from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from eval.verdict import Status


class ProblemResult(BaseModel):
    """One problem solved by one pipeline under one seed, scored on the hidden tests."""

    task_id: str
    pipeline: str
    seed: int
    status: Status
    reason: str = ""
    detail: str = ""
    iterations: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lm_calls: int = 0
    cached_lm_calls: int = 0
    reused_prompt_tokens: int = Field(
        default=0, description="Prompt tokens the server took from its prefix cache (where it says)."
    )
    reuse_reported_prompt_tokens: int = Field(
        default=0, description="Prompt tokens of the calls whose server reported its prefix reuse."
    )
    latency_s: float = Field(default=0.0, description="Wall time to solve and score the problem.")
    final_code: str = ""
    parsed: bool = Field(default=True, description="False if some role's reply was unparseable.")
    thread_id: str = Field(default="", description="The pool thread holding this solve's messages.")
    usage_by_role: dict[str, dict[str, float]] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Pipeline-specific per-problem metrics."
    )
    resolved_params: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameters the run resolved when it started (token_budget from "
        "token_budget_from: the measured mean of another pipeline on the run's problems); a "
        "checkpointed problem is reused only by a run that resolved the same.",
    )

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


TABLE_COLUMNS = (
    "task_id", "pipeline", "seed", "status", "reason", "passed", "iterations", "prompt_tokens",
    "completion_tokens", "total_tokens", "lm_calls", "cached_lm_calls", "latency_s", "parsed",
    "detail", "final_code",
)


def results_table(results: Sequence[ProblemResult]) -> Any:
    """A pandas DataFrame with one row per result (extra metrics flattened as ``extra.*``)."""
    import pandas as pd

    rows = []
    for result in results:
        row = {column: getattr(result, column) for column in TABLE_COLUMNS}
        row["status"] = result.status.value
        for key, value in result.extra.items():
            row[f"extra.{key}"] = value
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else list(TABLE_COLUMNS))
