"""Know the cost before you pay it: the LM calls, tokens and wall time that running an experiment
would take, per pipeline × seed, without calling the model or writing anything.

Each pipeline's cost per problem comes from the first of:

- ``measured``: every earlier problem checkpointed in this data directory under the same cost key
  (model and the settings that change its answers, dataset, pipeline, params, loaded prompts; see
  :func:`critiquelab.experiments.checkpoints.cost_keys`), from any experiment and seed;
- ``default``: :data:`critiquelab.experiments.costs.shipped.SHIPPED`, one documented run of the bundled 0.5B
  model on HumanEval, scaled where the params fix the number of LM calls (debaters × rounds, vote
  samples);
- ``unknown``: neither. No figure is invented.

Problems this configuration has already checkpointed cost nothing and are not counted.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from critiquelab.eval.datasets import HUMANEVAL
from critiquelab.eval.held_out import SplitName
from critiquelab.eval.results import ProblemResult, ResolvedParams
from critiquelab.experiments.checkpoints import (
    CheckpointStore,
    checkpoint_key,
    checkpoint_store,
    input_fingerprints,
)
from critiquelab.experiments.costs.shipped import SERVED_RUN, SHIPPED, PerProblem
from critiquelab.experiments.memory_run import memory_of
from critiquelab.experiments.paths import data_dir as default_data_dir
from critiquelab.experiments.paths import model_cache_dir
from critiquelab.experiments.runner import load_inputs
from critiquelab.experiments.serving.local_server import select_backend
from critiquelab.experiments.serving.model_files import DEFAULT_LOCAL_MODEL, resolve_bundled
from critiquelab.experiments.serving.provision import ModelIdentity, check_model_settings, resolve_model
from critiquelab.experiments.serving.server_build import find_built_server
from critiquelab.experiments.spec.experiment import ExperimentSpec, ModelSpec
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.pipelines.budget import budget_source, token_budget
from critiquelab.pipelines.params import PipelineParams

Z_80 = 1.2816  # the normal distribution's two-sided 80 % quantile
Source = Literal["measured", "default", "unknown"]
COST_FIGURES = ("lm_calls", "prompt_tokens", "completion_tokens", "wall_s")


class Figure(BaseModel):
    """A total over the problems to do."""

    expected: float
    low: float | None = Field(default=None, description="80 % range; None where no spread is known.")
    high: float | None = None


class PipelineEstimate(BaseModel):
    label: str
    pipeline: str
    seed: int
    problems: int = Field(description="Problems in the chosen subset.")
    done: int = Field(description="Already checkpointed for this configuration: cost nothing.")
    pending: int = Field(description="Problems to do.")
    source: Source
    measured_problems: int = Field(default=0, description="Earlier problems the figures come from.")
    basis: str = Field(description="Where the figures come from, in words.")
    per_problem: PerProblem | None = None
    lm_calls: Figure | None = None
    prompt_tokens: Figure | None = None
    completion_tokens: Figure | None = None
    wall_s: Figure | None = None


class Estimate(BaseModel):
    experiment: str
    model: str
    split: SplitName = Field(default="all", description="The dataset's held-out half the run would use.")
    parallel: int = Field(description="Problems assumed to run at once (the wall-time divisor).")
    parallel_reason: str
    pipelines: list[PipelineEstimate]
    in_order: list[str] = Field(
        default_factory=list,
        description="Pipelines with memory: one problem at a time, so their wall time is not divided.",
    )
    parallel_runs: int = Field(default=1, description="Child runs at once (the spec's parallel_runs).")

    @property
    def unknown(self) -> list[str]:
        """Labels whose problems to do have no cost figure."""
        return sorted({p.label for p in self.pipelines if p.pending and p.source == "unknown"})

    def total(self, figure: str) -> Figure:
        """The sum over the pipelines with a figure (see :attr:`unknown`); a range only if every
        one of them has one (the ranges added up: wider than 80 %)."""
        parts = [getattr(p, figure) for p in self.pipelines if p.pending and getattr(p, figure)]
        ranged = all(part.low is not None for part in parts)
        return Figure(
            expected=sum(part.expected for part in parts),
            low=sum(part.low for part in parts) if ranged and parts else None,
            high=sum(part.high for part in parts) if ranged and parts else None,
        )

    def table(self) -> str:
        """What ``critiquelab run SPEC --estimate`` prints: a row per pipeline × seed, the total,
        where the figures come from and what they assume."""
        header = ["pipeline", "seed", "to do", "done", "LM calls", "prompt tokens", "completion tokens",
                  "wall time", "from"]
        rows = [
            [p.label, str(p.seed), str(p.pending), str(p.done), *(_cell(p, f) for f in COST_FIGURES),
             p.source if p.source != "measured" else f"measured ({p.measured_problems})"]
            for p in self.pipelines
        ]
        unknown = " + ?" if self.unknown else ""
        pending, done = sum(p.pending for p in self.pipelines), sum(p.done for p in self.pipelines)
        rows.append(["total", "", str(pending), str(done),
                     *(_format(self.total(f), f) + unknown for f in COST_FIGURES), ""])
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        split = "" if self.split == "all" else f", dataset split {self.split}"
        lines = [
            f"Estimate for '{self.experiment}' on {self.model}{split} (no model called, nothing written):"
        ]
        for row in [header, *rows]:  # names left-aligned, figures right-aligned
            pairs = enumerate(zip(row, widths, strict=True))
            cells = [cell.ljust(width) if i in (0, 8) else cell.rjust(width) for i, (cell, width) in pairs]
            lines.append("  ".join(cells).rstrip())
        bases = {p.label: p.basis for p in self.pipelines}
        lines += ["", *(f"{label}: {basis}" for label, basis in bases.items())]
        if self.unknown:
            lines.append(f"No figures for {', '.join(self.unknown)}: the total leaves them out.")
        lines += [
            "Ranges: 80 % prediction intervals from the spread of the measured problems, assuming the "
            "problems to do cost like them (the total adds them up); a shipped default is one run's "
            "mean, without a range.",
            f"Wall time: seconds per problem × problems to do ÷ {self.parallel} ({self.parallel_reason}), "
            "start-up not included. "
            "Problems already checkpointed cost nothing and are not counted. Calls and tokens count as a "
            "run counts them, LM-cache hits included (they cost no model time).",
        ]
        if self.in_order:
            lines.append(f"{', '.join(self.in_order)}: memory solves one problem at a time, in order, so "
                         "their wall time is seconds per problem × problems to do.")
        if self.parallel_runs > 1:
            lines.append(f"parallel_runs {self.parallel_runs}: runs overlap, so the whole takes less than "
                         "the total wall time, which adds the runs up (by how much depends on the "
                         "server's spare capacity).")
        return "\n".join(lines)


_UNITS = (("s", 1.0, 90.0), ("min", 60.0, 5400.0), ("h", 3600.0, math.inf))


def _format(figure: Figure, name: str) -> str:
    values = [figure.expected, *((figure.low, figure.high) if figure.low is not None else ())]
    unit, size = "", 1.0
    if name == "wall_s":  # one unit for the figure and its range, chosen by the figure
        unit, size = next((f" {u}", s) for u, s, upto in _UNITS if figure.expected < upto)
    digits = 1 if unit and (unit != " s" or figure.expected < 10) else 0
    text = [f"{v / size:,.{digits}f}" for v in values]
    if len(set(text)) == 1:  # no range, or none at this precision
        return text[0] + unit
    return f"{text[0]}{unit} ({text[1]}–{text[2]}{unit})"


def _cell(row: PipelineEstimate, name: str) -> str:
    figure = getattr(row, name)
    if figure is None:
        return "?" if row.pending else "0"
    return _format(figure, name)


def _identity(model: ModelSpec) -> ModelIdentity:
    """The model as a run resolves it, without assembling or hashing a bundled model's file (its
    SHA-256 is known in advance, and that is all the cache identity needs)."""
    bundled = resolve_bundled(model.id)
    if bundled is None:
        identity = resolve_model(model)  # a LiteLLM string: checked, nothing touched
        check_model_settings(identity, model)
        return identity
    path = model_cache_dir() / "models" / bundled.filename
    return ModelIdentity(model.id, bundled.key, bundled.sha256, path)


def _history(home: Path, store: CheckpointStore) -> dict[str, list[ProblemResult]]:
    """Per cost key of this experiment's pipelines, the problems checkpointed under it in
    ``home``. Stores written before manifests existed count only for their own configuration
    (this experiment's store, and what --fresh set aside from it)."""
    wanted = set(store.pipeline_cost_keys.values())
    found: dict[str, list[ProblemResult]] = defaultdict(list)
    root = home / "checkpoints"
    for directory in sorted(root.iterdir()) if root.is_dir() else []:
        other = CheckpointStore(directory)
        recorded = other.recorded_cost_keys()
        if not recorded and directory.name.split(".old-")[0] == store.directory.name:
            recorded = store.pipeline_cost_keys
        for label, key in recorded.items():
            if key in wanted:
                found[key].extend(other.load_all(label))
    return found


def _total(values: Sequence[float], pending: int, divisor: float = 1.0) -> Figure:
    """``pending`` more problems like ``values`` (one per measured problem): their expected sum,
    and an 80 % prediction interval of it that allows for the spread of single problems and for
    the uncertainty of the mean (two or more measured problems)."""
    expected = pending * statistics.fmean(values) / divisor
    if len(values) < 2:
        return Figure(expected=expected)
    half = Z_80 * statistics.stdev(values) * math.sqrt(pending + pending**2 / len(values)) / divisor
    return Figure(expected=expected, low=max(0.0, expected - half), high=expected + half)


def _measured(row: PipelineEstimate, results: list[ProblemResult], parallel: int) -> None:
    # A problem that replayed every call from the LM cache says nothing of the model's time. One that
    # replayed some is kept as it is: a critic loop after a baseline replays the baseline's coder
    # call in every run of that experiment.
    seconds = [r.latency_s for r in results if not (r.lm_calls and r.cached_lm_calls == r.lm_calls)]
    calls = [float(r.lm_calls) for r in results]
    prompt = [float(r.prompt_tokens) for r in results]
    completion = [float(r.completion_tokens) for r in results]
    row.source, row.measured_problems = "measured", len(results)
    row.per_problem = PerProblem(
        lm_calls=statistics.fmean(calls), prompt_tokens=statistics.fmean(prompt),
        completion_tokens=statistics.fmean(completion),
        seconds=statistics.fmean(seconds) if seconds else None,
    )
    row.lm_calls = _total(calls, row.pending)
    row.prompt_tokens = _total(prompt, row.pending)
    row.completion_tokens = _total(completion, row.pending)
    row.wall_s = _total(seconds, row.pending, min(parallel, max(row.pending, 1))) if seconds else None
    plural = "s" if len(results) != 1 else ""
    row.basis = f"measured: {len(results)} earlier problem{plural} in this data directory"
    cached = sum(r.cached_lm_calls for r in results)
    if cached:  # counted, as a run counts them, but the model did not answer them again
        row.basis += f"; {cached} of their {sum(r.lm_calls for r in results)} calls came from the LM cache"
    if not seconds:
        row.basis += " (all of them: no wall time)"


def _shipped(
    row: PipelineEstimate, spec: ExperimentSpec, identity: ModelIdentity, params: PipelineParams,
    budget: float | None, parallel: int, server: str,
) -> None:
    shipped = SHIPPED.get(row.pipeline)
    covered = (
        identity.resolved == DEFAULT_LOCAL_MODEL and spec.dataset.source == HUMANEVAL
        and spec.model.temperature == 0.0 and spec.model.max_tokens == 1024
    )
    per = shipped.at(params, budget, server) if shipped is not None and covered else None
    if per is None:
        row.basis = (
            f"unknown: no earlier problem of '{row.label}' run this way in this data directory, and no "
            f"shipped default for it on {identity.resolved}; run a few problems (--limit 3) to measure"
        )
        return
    assert shipped is not None and per.seconds is not None
    row.source, row.per_problem = "default", per
    row.lm_calls = Figure(expected=row.pending * per.lm_calls)
    row.prompt_tokens = Figure(expected=row.pending * per.prompt_tokens)
    row.completion_tokens = Figure(expected=row.pending * per.completion_tokens)
    row.wall_s = Figure(expected=row.pending * per.seconds / min(parallel, max(row.pending, 1)))
    scaled = "" if per.lm_calls == shipped.lm_calls else (
        f", scaled from {shipped.lm_calls:g} to {per.lm_calls:g} calls"
    )
    row.basis = f"shipped default: {shipped.measured_with}{scaled}"
    if server == "llama-server":
        row.basis += f"; wall time: {SERVED_RUN}"


def _checkpointed(
    store: CheckpointStore, label: str, seed: int, wanted: set[str], source: str | None,
    measured_budget: dict[tuple[str, int], float | None],
) -> tuple[dict[str, ProblemResult], float | None]:
    """The wanted problems the run would take from checkpoints, and their measured tokens per
    problem when all are there (a later ``token_budget_from`` this pipeline resolves to it).
    A pipeline whose budget is not known yet (its source has problems to run) reuses nothing."""
    if source is None:
        resolved: ResolvedParams | None = ResolvedParams()
    else:
        budget = measured_budget.get((source, seed))
        resolved = None if budget is None else ResolvedParams(token_budget=budget)
    if resolved is None:
        return {}, None
    rows = {t: r for t, r in store.load(label, seed, resolved).items() if t in wanted}
    if len(rows) < len(wanted) or not rows:
        return rows, None
    return rows, sum(r.total_tokens for r in rows.values()) / len(rows)


def estimate_run(spec: ExperimentSpec, home: Path | None = None, *, fresh: bool = False) -> Estimate:
    """What running ``spec`` in ``home`` would cost, per pipeline × seed; ``fresh`` as for
    :func:`critiquelab.experiments.runner.run_experiment` (checkpoints ignored: every problem is to do).

    The spec is checked as a run checks it (dataset rows, pipelines, prompts, model name), except
    that no endpoint is contacted and no model file is assembled. Nothing is written to ``home``.
    """
    home = home or default_data_dir()
    uri = tracking_uri(home, spec.tracking.uri)
    problems, dataset_notices = load_inputs(spec, uri)
    for notice in dataset_notices:  # nothing below contacts a service that could refuse
        logging.getLogger(__name__).warning("%s", notice)
    identity = _identity(spec.model)
    fingerprints = input_fingerprints(spec, uri)
    store = checkpoint_store(spec, identity, checkpoint_key(spec, identity, fingerprints), home, fingerprints)
    history = _history(home, store)
    wanted = {p.task_id for p in problems}
    server = select_backend(spec.model.server, find_built_server()).name if identity.is_local else ""
    if server == "llama-cpp-python":
        parallel, reason = 1, "llama-cpp-python's server answers one request at a time"
    elif server == "llama-server":
        parallel, reason = spec.concurrency, (
            f"the concurrency, served by llama-server's {spec.model.slots} slots; per-problem times "
            "measured at the same concurrency"
        )
    else:
        parallel, reason = spec.concurrency, "the concurrency, if the endpoint serves that many at once"
    rows: list[PipelineEstimate] = []
    per_problem: dict[tuple[str, int], PerProblem | None] = {}
    measured_budget: dict[tuple[str, int], float | None] = {}  # what token_budget_from would resolve
    # A run with memory solves its problems one at a time whatever the concurrency.
    in_order = [p.display_name for p in spec.pipelines if memory_of(p)]
    for pipeline_spec in spec.pipelines:
        label = pipeline_spec.display_name
        results = history.get(store.pipeline_cost_keys[label], [])
        source_label = budget_source(pipeline_spec.params)
        at_once = 1 if label in in_order else parallel
        for seed in spec.seeds:
            done_rows, measured_budget[(label, seed)] = _checkpointed(
                store, label, seed, wanted, source_label, measured_budget
            )
            done = 0 if fresh else len(done_rows)
            row = PipelineEstimate(
                label=label, pipeline=pipeline_spec.name, seed=seed, problems=len(wanted), done=done,
                pending=len(wanted) - done, source="unknown", basis="",
            )
            if results:
                _measured(row, results, at_once)
            # Loaded prompts change every call's size, role models and temperatures its answers.
            elif spec.prompts_of(pipeline_spec) is None and not pipeline_spec.roles:
                budget = token_budget(pipeline_spec.params)
                if source_label is not None:
                    known = per_problem.get((source_label, seed))
                    budget = known.prompt_tokens + known.completion_tokens if known else None
                if source_label is None or budget is not None:
                    _shipped(row, spec, identity, pipeline_spec.params, budget, at_once, server)
                else:
                    row.basis = (
                        f"unknown: its token budget comes from '{source_label}', whose cost is unknown"
                    )
            if not row.basis:
                what = "role settings" if pipeline_spec.roles else "prompts"
                row.basis = (
                    f"unknown: no earlier problem of '{label}' with these {what} in this data directory"
                )
            per_problem[(label, seed)] = row.per_problem
            rows.append(row)
    model = identity.resolved + (f" at {identity.api_base}" if identity.api_base else "")
    return Estimate(
        experiment=spec.name, model=model, split=spec.dataset.split, parallel=parallel,
        parallel_reason=reason, pipelines=rows, parallel_runs=spec.parallel_runs,
        in_order=in_order,
    )
