"""The per-problem record every pipeline run produces, and the table built from them.

:class:`ProblemResult` is the one result schema: the runner checkpoints it (JSON lines), logs it
as the per-problem table (:func:`results_table`, ``problems.parquet``) and in each problem's
trace; compare and the viewer read the table back into it (:func:`results_from_table`).
``extra`` holds the pipeline's figures flat, one key per figure, as its outcome model
(``critiquelab.pipelines.outcomes``) declares them. Every stored record carries its ``schema_version``; older
versions are read through the one migration in :mod:`critiquelab.eval.result_schema`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from critiquelab.eval.result_schema import RESULT_SCHEMA, upgrade_record
from critiquelab.eval.verdict import Status


class ResolvedParams(BaseModel):
    """Parameters a run resolved when it started, from what ran before it: a checkpointed problem
    is reused only by a run that resolved the same (a token budget measured on another subset of
    problems is another budget).

    Stored as what was resolved and nothing else — ``{}``, or ``{"token_budget": 1234.5}`` — the
    shape checkpoints and traces have always had."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_budget: float | None = Field(
        default=None,
        description="token_budget from token_budget_from: the measured tokens per problem of another "
        "pipeline under the same seed (critiquelab.pipelines.budget); None: nothing to resolve.",
    )

    @model_serializer(mode="wrap")
    def _only_what_was_resolved(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {name: value for name, value in dumped.items() if value is not None}


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
    truncated_replies: int = Field(
        default=0, description="Model replies that stopped at their max_tokens: cut off, not finished."
    )
    latency_s: float = Field(default=0.0, description="Wall time to solve and score the problem.")
    final_code: str = ""
    parsed: bool = Field(default=True, description="False if some role's reply was unparseable.")
    thread_id: str = Field(default="", description="The pool thread holding this solve's messages.")
    isolation: str = Field(
        default="",
        description="The sandbox isolation level the hidden tests ran under (per problem, so a run "
        "spread over machines shows whether levels were mixed); empty: not known.",
    )
    usage_by_role: dict[str, dict[str, float]] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="The pipeline's per-problem figures, flat "
        "(``critiquelab.pipelines.outcomes.Outcome.figures``).",
    )
    resolved_params: ResolvedParams = Field(
        default_factory=ResolvedParams, description="Parameters the run resolved when it started."
    )

    schema_version: int = Field(
        default=RESULT_SCHEMA,
        description="The stored result schema (critiquelab.eval.result_schema), written with every record "
        "and "
        "table row; a record of an older version is upgraded as it is read, so this is always the "
        "current one once read.",
    )

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, data: Any) -> Any:
        """A stored record of any schema version read as the current one (critiquelab.eval.result_schema). A
        result built in code goes through it too: it has no version yet, and the upgrade of an
        unversioned record leaves a current-shaped one as it is."""
        return upgrade_record(data) if isinstance(data, Mapping) else data

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


TABLE_COLUMNS = (
    "task_id", "pipeline", "seed", "status", "reason", "passed", "iterations", "prompt_tokens",
    "completion_tokens", "total_tokens", "lm_calls", "cached_lm_calls", "latency_s", "parsed",
    "isolation", "detail", "final_code", "schema_version",
)


def results_table(results: Sequence[ProblemResult]) -> Any:
    """A pandas DataFrame with one row per result (extra metrics flattened as ``extra.*``)."""
    import pandas as pd

    rows = []
    for result in results:
        row = {column: getattr(result, column) for column in TABLE_COLUMNS}
        row["status"] = result.status.value
        # JSON text: the roles differ between pipelines, so a nested column would not keep one
        # type across runs; a study's tokens by model are summed from it.
        row["usage_by_role"] = json.dumps(result.usage_by_role, sort_keys=True)
        for key, value in result.extra.items():
            row[f"extra.{key}"] = value
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else [*TABLE_COLUMNS, "usage_by_role"])


def plain_cell(value: Any) -> Any:
    """A table cell (numpy arrays and scalars, NaN) as a JSON-like Python value; NaN is None."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def results_from_table(frame: Any) -> list[ProblemResult]:
    """The results a per-problem table holds, :func:`results_table` read back: the table's
    columns into their fields, ``extra.*`` into ``extra``. An empty cell (NaN: a figure that
    problem did not record, or a column an older table lacks) is left out, so the field takes
    its default; what the table does not keep (token reuse, thread, resolved params — and usage
    by role in a table written before it was kept) has its default too. Other columns
    (compare's ``run_id``, ``messages``) are ignored."""
    results = []
    for row in frame.to_dict("records"):
        cells = {column: plain_cell(value) for column, value in row.items()}
        fields = {k: v for k, v in cells.items() if k in ProblemResult.model_fields and v is not None}
        if isinstance(fields.get("usage_by_role"), str):
            fields["usage_by_role"] = json.loads(fields["usage_by_role"])
        extra = {k.removeprefix("extra."): v for k, v in cells.items()
                 if k.startswith("extra.") and v is not None}
        results.append(ProblemResult.model_validate({**fields, "extra": extra}))
    return results
