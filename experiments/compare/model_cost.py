"""compare's cost by model: when roles ran on models of different sizes, a token is not a token.

A run whose roles used more than one model logs ``model.<id>.tokens`` per model and the seconds
each model took with the tokens those seconds cover (``.model_s``, ``.timed_tokens``:
:func:`critiquelab.experiments.serving.role_models.usage_by_model`). Pooled over the compared runs, they give
each model's measured seconds per token on this machine; the section weighs every run's tokens
by them: ``model_s_per_problem`` = Σ over models of tokens per problem × that model's seconds per
token — what the run's calls cost in model time, cached calls included at the speed measured
when they were made. A run on one model (a baseline) counts all its tokens toward the
experiment's model. Written as ``model_cost.csv`` and a section of ``summary.md`` and
``report.html``; absent when every compared run used one model.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from critiquelab.experiments.compare.compared_run import ComparedRun

COST_FILE = "model_cost.csv"
_MODEL = "model."


def _per_model(metrics: dict[str, float], field: str) -> dict[str, float]:
    """``model.<id>.<field>`` as {id: value} (model ids may hold dots: the field is the suffix)."""
    suffix = f".{field}"
    return {key[len(_MODEL):-len(suffix)]: value for key, value in metrics.items()
            if key.startswith(_MODEL) and key.endswith(suffix)}


def seconds_per_token(logged: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each model's measured seconds per token, pooled over the runs' metrics (models whose
    seconds cover no token are left out: their speed is not known)."""
    seconds: dict[str, float] = {}
    tokens: dict[str, float] = {}
    for metrics in logged:
        for model, value in _per_model(metrics, "model_s").items():
            seconds[model] = seconds.get(model, 0.0) + value
        for model, value in _per_model(metrics, "timed_tokens").items():
            tokens[model] = tokens.get(model, 0.0) + value
    return {model: seconds.get(model, 0.0) / count for model, count in tokens.items() if count > 0}


def model_cost_frame(
    runs: Sequence[ComparedRun], logged: Sequence[dict[str, float]], default_models: Sequence[str]
) -> tuple[pd.DataFrame, dict[str, float]]:
    """One row per run: tokens per problem on each model and the model seconds per problem at
    the measured speeds (NaN when a model's speed is not known); with the speeds.
    ``default_models``: each run's experiment model. (Not the run's wall time: a resumed run's
    ``wall_time_s`` covers its last invocation only.)"""
    speeds = seconds_per_token(logged)
    per_run = []
    for metrics, default in zip(logged, default_models, strict=True):
        tokens = _per_model(metrics, "tokens") or {default: metrics.get("total_tokens", 0.0)}
        per_run.append(tokens)
    models = sorted({model for tokens in per_run for model in tokens})
    rows = []
    for run, metrics, tokens in zip(runs, logged, per_run, strict=True):
        count = int(metrics.get("problems", 0))
        problems = count or math.nan
        row: dict[str, Any] = {"pipeline": run.label, "seed": run.seed, "problems": count}
        for model in models:
            row[f"tokens/problem {model}"] = tokens.get(model, 0.0) / problems
        row["model_s/problem"] = sum(
            used * speeds.get(model, math.nan) for model, used in tokens.items()
        ) / problems
        rows.append(row)
    return pd.DataFrame(rows), speeds


def model_cost_section(client: Any, runs: Sequence[ComparedRun], out: Path, files: dict[str, Path]) -> str:
    """Write ``model_cost.csv`` and put the section into ``report.html``; the Markdown section is
    returned ('' when no compared run used more than one model)."""
    from critiquelab.eval.report import add_html_section, frame_html, markdown_table

    logged = [dict(client.get_run(run.run_id).data.metrics) for run in runs]
    if not any(_per_model(metrics, "tokens") for metrics in logged):
        return ""
    experiment_model: dict[str, str] = {}
    for run in runs:
        if run.parent_id and run.parent_id not in experiment_model:
            params = client.get_run(run.parent_id).data.params
            experiment_model[run.parent_id] = params.get("config.model.id", "the experiment's model")
    defaults = [experiment_model.get(run.parent_id, "the experiment's model") for run in runs]
    frame, speeds = model_cost_frame(runs, logged, defaults)
    files["model_cost"] = out / COST_FILE
    frame.to_csv(files["model_cost"], index=False)
    measured = ", ".join(f"{model} {speed * 1000:.2f} ms" for model, speed in sorted(speeds.items()))
    unknown = sorted({c.removeprefix("tokens/problem ") for c in frame.columns
                      if c.startswith("tokens/problem ")} - speeds.keys())
    lines = [
        "Roles ran on more than one model, so tokens are weighed by each model's seconds per token,",
        "measured in these runs (cached calls at the time recorded when they were made): "
        f"{measured or 'none'}.",
        "`model_s/problem` = Σ tokens per problem × seconds per token: the model time a problem costs.",
    ]
    if unknown:
        lines.append(f"No measured speed for {', '.join(unknown)} (its calls predate timed cache entries): "
                     "its runs' model time is not given.")
    text = html.escape(" ".join(lines).replace("`", ""))
    section = f"<section><h2>Cost by model</h2><p>{text}</p>{frame_html(frame)}</section>"
    add_html_section(files["html"], section)
    return "\n\n## Cost by model\n\n" + "\n".join(lines) + "\n\n" + markdown_table(frame) + "\n"
