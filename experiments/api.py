"""The library API behind the CLI, usable from a notebook::

    from experiments.api import run
    result = run("experiments/baseline.yaml", limit=5)
    result.summary()
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.runner import ExperimentResult, run_experiment
from experiments.spec import ExperimentSpec, load_yaml, parse_spec


def offline_defaults() -> None:
    """Environment defaults for a machine without network: no hub downloads, no LiteLLM
    price-map fetch. Existing values win."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # ChromaDB's telemetry
    # The embedding model's loading bars are noise next to the harness's own progress bar.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def apply_overrides(
    data: dict[str, Any],
    *,
    model: str | None = None,
    api_base: str | None = None,
    api_key_env: str | None = None,
    dataset: str | None = None,
    limit: int | None = None,
    task_ids: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """Command-line overrides onto raw spec data, before validation (so they are validated too)."""
    data = {**data}
    model_data = dict(data.get("model") or {})
    dataset_data = dict(data.get("dataset") or {})
    if model is not None:
        model_data["id"] = model
    if api_base is not None:
        model_data["api_base"] = api_base
    if api_key_env is not None:
        model_data["api_key_env"] = api_key_env
    if dataset is not None:
        dataset_data["source"] = dataset
    if limit is not None:
        dataset_data["limit"] = limit
    if task_ids:
        dataset_data["task_ids"] = list(task_ids)
    if seeds:
        data["seeds"] = list(seeds)
    if concurrency is not None:
        data["concurrency"] = concurrency
    data["model"], data["dataset"] = model_data, dataset_data
    return data


def load_experiment(spec: str | Path | dict[str, Any], **overrides: Any) -> ExperimentSpec:
    if isinstance(spec, dict):
        return parse_spec(apply_overrides(spec, **overrides), "spec")
    path = Path(spec)
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        return parse_spec(raw, str(path))
    return parse_spec(apply_overrides(raw, **overrides), str(path))


def run(
    spec: str | Path | dict[str, Any],
    *,
    home: Path | None = None,
    fresh: bool = False,
    cache: bool = True,
    progress: bool = True,
    **overrides: Any,
) -> ExperimentResult:
    """Validate a spec (path or dict) with overrides, run it, return the results."""
    offline_defaults()
    experiment = load_experiment(spec, **overrides)
    return run_experiment(experiment, home=home, fresh=fresh, cache=cache, progress=progress)
