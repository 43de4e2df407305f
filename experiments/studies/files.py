"""The study format, version 1: which files a study folder holds and what each must contain.

::

    studies/<name>/
      manifest.json    StudyManifest: provenance, evidence status, and the SHA-256 of every other file
      spec.yaml        the experiment spec exactly as it ran (the parent run's resolved config)
      outcomes.jsonl   one line per arm × seed × problem: passed, the final program, tokens …
      runs.json        RecordedRun per pipeline run (and per parent): params, metrics, tags
      summary.md       compare's report on the outcomes, as ``critiquelab compare STUDY`` prints it

JSON lines and JSON diff line by line in review; a final program is a JSON string, so a
multi-line program never breaks a row as it would in CSV.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA: Literal["critiquelab.study/1"] = "critiquelab.study/1"
MANIFEST = "manifest.json"
SPEC = "spec.yaml"
OUTCOMES = "outcomes.jsonl"
RUNS = "runs.json"
SUMMARY = "summary.md"
CHECKSUMMED = (SPEC, OUTCOMES, RUNS, SUMMARY)  # every file but the manifest, which holds their sums

# Columns every outcome line has; the rest are the arm's own figures (``extra.*``, as in a run's
# problems.parquet) and per-problem counts that older runs may lack.
OUTCOME_COLUMNS = (
    "arm", "seed", "task_id", "run_id", "passed", "status", "final_code", "prompt_tokens",
    "completion_tokens", "lm_calls",
)

Evidence = Literal["held_out", "in_sample"]
EVIDENCE_TEXT = {
    "held_out": "held out: nothing reported here was chosen on these problems",
    "in_sample": "in-sample: a choice reported here was made on these same problems",
}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordedRun(_Frozen):
    """One MLflow run of the study as it was logged: enough for compare's sections (cost by
    model, learning curves, provenance) to read it as they read the live store."""

    run_id: str = Field(description="The MLflow run id, in full.")
    parent_id: str = Field(default="", description="The parent run's id ('' for a parent itself).")
    label: str = Field(default="", description="The arm (pipeline label) of a pipeline run; '' for a parent.")
    seed: int = Field(default=0, description="The seed of a pipeline run.")
    pipeline: str = Field(default="", description="The registered pipeline the arm ran.")
    control: str = Field(default="", description="The positive control the run was, '' for none.")
    warnings: tuple[str, ...] = Field(default=(), description="What the run warned about when it ended.")
    status: str = Field(description="MLflow's status of the run when the study was written (FINISHED).")
    start_time: int = Field(default=0, description="Start, milliseconds since the epoch.")
    end_time: int = Field(default=0, description="End, milliseconds since the epoch.")
    params: dict[str, str] = Field(default_factory=dict, description="The run's logged params.")
    metrics: dict[str, float] = Field(default_factory=dict, description="The run's latest metrics.")
    tags: dict[str, str] = Field(default_factory=dict, description="The run's tags (MLflow's own left out).")


class StudyDataset(_Frozen):
    """Which problems the study measured."""

    source: str = Field(description="The spec's dataset source (humaneval, a file path …).")
    split: str = Field(description="dev, test or all (README's held-out protocol: dev = even task numbers).")
    problems: int = Field(ge=1, description="Distinct task ids in the outcomes.")


class StudyManifest(_Frozen):
    """What a study is, where it came from, and the checksums that say its files are as written."""

    schema_version: Literal["critiquelab.study/1"] = Field(
        default=SCHEMA, alias="schema", description="The format's version; read by this module only."
    )
    name: str = Field(min_length=1, description="The study's name (its folder's name).")
    description: str = Field(default="", description="One sentence: the question the study answers.")
    evidence: Evidence = Field(description="held_out or in_sample, printed beside every figure of it.")
    tuned_on: str = Field(
        default="", description="Which problems any choice reported here was tuned on ('' for none)."
    )
    notes: tuple[str, ...] = Field(default=(), description="What a reader must know beside the figures.")
    dataset: StudyDataset
    parent_run_ids: tuple[str, ...] = Field(description="The experiment (parent) runs, in full.")
    run_ids: dict[str, str] = Field(description="Each arm × seed ('<arm>/seed=<n>') to its pipeline run id.")
    git_commit: str = Field(description="The commit the runs' code was at ('-dirty' when it had changes).")
    code_fingerprint: str = Field(default="", description="SHA-256 over the package sources that ran.")
    model_sha256: dict[str, str] = Field(
        description="Each model the runs used to its file's SHA-256 ('n/a' for an endpoint).")
    versions: dict[str, str] = Field(description="Python and package versions the runs logged.")
    started: str = Field(description="When the first run started (UTC, ISO 8601).")
    ended: str = Field(description="When the last run ended (UTC, ISO 8601).")
    wall_time_s: float = Field(ge=0, description="Seconds the pipeline runs took, summed.")
    lm_calls: int = Field(ge=0, description="Model calls the outcomes record.")
    cached_lm_calls: int = Field(
        ge=0, description="Of those, answered from the LM cache: a replay of recorded replies (the runs' "
        "times are then not the model's; the replies and outcomes are).")
    machine: str = Field(
        description="The machine the study was written on (the runs' own when written by `run --study`).")
    written: str = Field(description="When the study was written (UTC, ISO 8601).")
    files: dict[str, str] = Field(description="SHA-256 of every other file of the study.")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
