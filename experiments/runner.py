"""Run an experiment: pipelines × seeds over a dataset, one MLflow child run each under a
parent run, every finished problem checkpointed so a killed run resumes where it stopped."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError
from eval.datasets import HUMANEVAL, load_problems
from eval.problems import Problem
from eval.results import ProblemResult, results_table
from eval.scoring import NO_CODE
from eval.summary import summarize
from experiments.checkpoints import CheckpointStore, cost_keys
from experiments.executors.factory import open_executor
from experiments.executors.job import Executor, SolveJob
from experiments.memory_run import (
    check_warm_starts,
    memory_metrics,
    memory_of,
    open_bank,
    run_order,
    with_memory,
)
from experiments.paths import data_dir as default_data_dir
from experiments.paths import path_segment
from experiments.progress import ProgressBar
from experiments.serving.provision import ModelIdentity, resolve_model, serve_model
from experiments.serving.role_models import RoleModels, models_by_role, usage_by_model
from experiments.spec import SCHEDULING_FIELDS, ExperimentSpec, PipelineSpec
from experiments.tracking.provenance import code_fingerprint
from experiments.tracking.run_records import child_run, open_parent_run, results_digest
from experiments.tracking.store import PARENT_TAG, RESULTS_TAG, Tracker, flatten, tracking_uri
from experiments.tracking.traces import ProblemTracer, trace_checkpointed
from pipelines.budget import BUDGET_FROM
from pipelines.parallel_agents import PARALLEL_AGENTS
from pipelines.pool.message_pool import MessagePool
from pipelines.registry import create_pipeline, outcome_model


@dataclass
class ChildRun:
    """One pipeline × seed: its MLflow run, per-problem results and aggregate metrics."""

    pipeline: str
    seed: int
    run_id: str
    results: list[ProblemResult]
    metrics: dict[str, float]
    warnings: list[str] = field(default_factory=list)  # what may make its numbers misleading


@dataclass
class ExperimentResult:
    experiment_id: str
    parent_run_id: str
    children: list[ChildRun] = field(default_factory=list)
    comparison: Any = None  # experiments.compare.ComparisonResult, when the run compared its pipelines

    @property
    def warnings(self) -> list[str]:
        """One line each; also tagged on the child run they concern."""
        return [w for c in self.children for w in c.warnings]

    def summary(self) -> Any:
        """A pandas DataFrame: one row per pipeline × seed."""
        import pandas as pd

        rows = [
            {
                "pipeline": c.pipeline, "seed": c.seed,
                "pass@1": round(c.metrics["pass_at_1"], 4),
                "passed": int(c.metrics["problems_passed"]), "problems": int(c.metrics["problems"]),
                "tokens/problem": round(c.metrics["tokens_per_problem"], 1),
                "lm_calls": int(c.metrics["lm_calls"]), "run_id": c.run_id,
            }
            for c in self.children
        ]
        return pd.DataFrame(rows)


def _dataset_fingerprint(spec: ExperimentSpec) -> str:
    source = spec.dataset.source
    if source == HUMANEVAL:
        return HUMANEVAL
    path = Path(source).expanduser()
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    return str(path.resolve())


def prompts_of(spec: ExperimentSpec, pipeline_spec: PipelineSpec) -> str | None:
    """The exported prompts a pipeline runs with: its own, else the experiment's."""
    return pipeline_spec.prompts or spec.prompts


def _prompts_fingerprint(spec: ExperimentSpec, registry_uri: str) -> dict[str, str] | None:
    """Loaded prompts change every result, so their content is part of the checkpoint key."""
    from optimizers.export import prompts_fingerprint

    sources = {p.display_name: prompts_of(spec, p) for p in spec.pipelines}
    found = {
        label: prompts_fingerprint(source, registry_uri=registry_uri)
        for label, source in sources.items() if source
    }
    return found or None


def make_pipeline(
    name: str, params: dict[str, Any], prompts: str | None = None, registry_uri: str | None = None
) -> Any:
    """A registered pipeline, with exported prompts (a directory, ``program.json`` or
    ``prompts:/`` registry URIs) loaded into it if ``prompts`` names any."""
    pipeline = create_pipeline(name, **params)
    if prompts:
        from optimizers.export import load_prompts_into

        load_prompts_into(pipeline, prompts, registry_uri=registry_uri)
    return pipeline


def checkpoint_key(spec: ExperimentSpec, identity: ModelIdentity, registry_uri: str) -> str:
    """What determines a problem's result; the subset (limit, task ids) and concurrency do not,
    so a larger run reuses a smaller run's finished problems."""
    material = {
        "name": spec.name,
        "dataset": {  # the format and challenge tests change the hidden tests, hence every result
            "source": _dataset_fingerprint(spec), "fields": spec.dataset.fields,
            "format": spec.dataset.format, "challenge_tests": spec.dataset.challenge_tests,
        },
        # Transport and serving settings change no answer's cache key, so no checkpoint either.
        "model": spec.model.model_dump(exclude={"num_retries", "timeout_s", "server", "slots"}),
        "model_identity": identity.cache_identity,
        # parallel_agents changes when role calls are made, never what they ask (tested): runs
        # that differ only in it share their finished problems.
        # Memory left off leaves the key as it was before memory existed.
        "pipelines": [
            {**p.model_dump(exclude=set() if memory_of(p) else {"memory"}),
             "params": {k: v for k, v in p.params.items() if k != PARALLEL_AGENTS}}
            for p in spec.pipelines
        ],
        "execution": spec.execution.model_dump(exclude=set(SCHEDULING_FIELDS)),
        "prompts": _prompts_fingerprint(spec, registry_uri),
        "code": code_fingerprint(),
        **({"order_seed": spec.order_seed} if spec.order_seed is not None else {}),
    }
    blob = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def checkpoint_store(
    spec: ExperimentSpec, identity: ModelIdentity, key: str, home: Path, registry_uri: str
) -> CheckpointStore:
    """Where the configuration ``key`` checkpoints its finished problems, with each pipeline's
    cost key in the store's manifest."""
    prompts = _prompts_fingerprint(spec, registry_uri) or {}
    keys = cost_keys(spec, identity.cache_identity, _dataset_fingerprint(spec), prompts)
    return CheckpointStore(home / "checkpoints" / f"{path_segment(spec.name)}-{key}", cost_keys=keys)


def load_inputs(spec: ExperimentSpec, registry_uri: str) -> list[Problem]:
    """The spec's problems, each pipeline built once with its prompts: bad input fails here,
    before anything is written."""
    problems = load_problems(
        spec.dataset.source, spec.dataset.fields, spec.dataset.limit, spec.dataset.task_ids or None,
        dataset_format=spec.dataset.format, challenge_tests=spec.dataset.challenge_tests,
    )
    for pipeline_spec in spec.pipelines:
        # Names, params and BUDGET_FROM's label were checked with the spec; the budget is per run.
        params = {k: v for k, v in pipeline_spec.params.items() if k != BUDGET_FROM}
        make_pipeline(pipeline_spec.name, params, prompts_of(spec, pipeline_spec), registry_uri)
    return problems


class _LazyLM:
    """Starts the model (server) only when a problem actually needs it, so re-running a
    finished experiment neither starts a server nor makes an LM call."""

    def __init__(self, identity: ModelIdentity, spec: ExperimentSpec, home: Path, cache: bool):
        self._args = (identity, spec.model, home)
        self._cache = cache
        self._stack = contextlib.ExitStack()
        self._lm: Any = None

    def get(self) -> Any:
        if self._lm is None:
            identity, model, home = self._args
            self._lm = self._stack.enter_context(serve_model(identity, model, home, cache=self._cache))
        return self._lm

    def served_by(self) -> dict[str, str]:
        """What serves the model (empty until it is started)."""
        return dict(self._lm.served_by) if self._lm is not None else {}

    def close(self) -> None:
        self._stack.close()


def _resolve_params(spec: PipelineSpec, seed: int, finished: list[ChildRun]) -> dict[str, Any]:
    """``token_budget_from: LABEL`` becomes ``token_budget``: that pipeline's measured tokens per
    problem under the same seed, so an equal-compute baseline spends what it is compared to."""
    params = dict(spec.params)
    source = params.get(BUDGET_FROM)
    if source is None:
        return params
    del params[BUDGET_FROM]
    match = next((c for c in finished if c.pipeline == source and c.seed == seed), None)
    if match is None:
        raise UserError(f"{BUDGET_FROM}: no finished run of '{source}' with seed {seed}")
    params["token_budget"] = match.metrics["tokens_per_problem"]
    return params


def _no_code_warnings(label: str, seed: int, results: list[ProblemResult]) -> list[str]:
    """Empty or prose-only replies usually mean a broken endpoint, not a weak model: they are
    reported (on screen and on the run) rather than passing as ordinary failures."""
    count = sum(r.reason == NO_CODE for r in results)
    if not count:
        return []
    return [
        f"{label} seed {seed}: {count} of {len(results)} problems got no code from the model (empty "
        "or prose-only replies); if the endpoint was at fault, fix it and run again with --fresh "
        "(empty replies are never cached; prose is: add --no-cache)"
    ]


def _run_child(
    tracker: Tracker, store: CheckpointStore, parent_id: str, siblings: list[Any],
    spec: ExperimentSpec, pipeline_spec: PipelineSpec, seed: int, problems: list[Problem],
    lazy_lm: _LazyLM, role_models: RoleModels, pool: MessagePool, executor: Executor,
    show_progress: bool, finished: list[ChildRun], home: Path,
) -> ChildRun:
    label = pipeline_spec.display_name
    problems = run_order(problems, spec.order_seed, seed)
    run_id, logged = child_run(tracker, parent_id, siblings, label, seed)
    params = _resolve_params(pipeline_spec, seed, finished)
    resolved = {k: v for k, v in params.items() if pipeline_spec.params.get(k) != v}
    done = store.load(label, seed, resolved)
    pending = [p for p in problems if p.task_id not in done]
    pending_ids = {p.task_id for p in pending}
    if not pending and logged is not None and logged.info.status == "FINISHED":
        results = [done[p.task_id] for p in problems]
        if logged.data.tags.get(RESULTS_TAG) == results_digest(results):
            metrics = {**summarize(results, outcome_model(pipeline_spec.name).run_metrics),
                       "wall_time_s": logged.data.metrics.get("wall_time_s", 0.0)}
            warnings = _no_code_warnings(label, seed, results)
            return ChildRun(label, seed, run_id, results, metrics, warnings)  # left as it was
    if logged is not None:
        tracker.reopen(run_id)
    tracker.log_params(run_id, {
        "pipeline": pipeline_spec.name, "pipeline.label": label, "seed": seed,
        **flatten(pipeline_spec.params, "pipeline.params."),
    })
    if params != pipeline_spec.params:
        tracker.log_params(run_id, flatten(params, "pipeline.resolved."))
    pipeline = make_pipeline(pipeline_spec.name, params, prompts_of(spec, pipeline_spec), tracker.uri)
    memory = memory_of(pipeline_spec)
    bank = open_bank(home, memory, spec.pool.chroma_url) if memory else None
    if memory and bank:
        pipeline = with_memory(pipeline, bank, memory, run_id)
    bar = ProgressBar(f"{label} seed={seed}", total=len(problems), enabled=show_progress)
    for task in problems:
        if task.task_id in done:
            bar.update(done[task.task_id])
    start = time.monotonic()
    tracer, traced = None, set()
    try:
        if pending:
            lm = lazy_lm.get()
            if spec.tracking.traces:
                tracer = ProblemTracer(tracker.uri, tracker.experiment_id, run_id, str(lm.model))
                traced = tracer.traced_tasks() if logged is not None else set()
            if spec.model.send_seed:
                lm = lm.copy(seed=seed)
            job = SolveJob(pipeline, lm, label, seed, spec.execution.timeout_s, run_id,
                           role_lms=role_models.lms_for(pipeline_spec, lm, seed), in_order=memory is not None)
            results = executor.solve(job, pending, pool)
            with contextlib.closing(results):  # an error here stops the problems in flight too
                for result in results:
                    if tracer is not None and result.task_id not in traced:  # queued; see close()
                        tracer.submit(result, pool.history(thread_id=result.thread_id), time.time())
                    result.resolved_params = resolved
                    store.append(result)
                    done[result.task_id] = result
                    bar.update(result)
            if tracer is not None:
                tracer.close()  # every trace stored before the run is marked finished
    except BaseException:
        bar.close()
        if bank:
            bank.close()
        tracker.finish(run_id, "KILLED")
        raise
    bar.close()
    results = [done[p.task_id] for p in problems]
    if tracer is not None and len(pending) < len(problems):  # resumed: some came from checkpoints
        trace_checkpointed(tracer, results, pool.history, traced | {r.task_id for r in results
                                                                     if r.task_id in pending_ids})
    metrics = summarize(results, outcome_model(pipeline_spec.name).run_metrics)
    metrics.update(usage_by_model(results, models_by_role(pipeline_spec), spec.model.id))
    metrics["wall_time_s"] = time.monotonic() - start
    if memory and bank:
        with bank:
            memory_values, blocks = memory_metrics(bank, memory, run_id, results)
        metrics.update(memory_values)
        tracker.log_text(run_id, json.dumps(blocks, indent=1), "memory_error_blocks.json")
    tracker.log_metrics(run_id, metrics, only_changed=True)
    tracker.log_frame(run_id, results_table(results), "problems")
    # By thread, not by run id: problems resumed from checkpoints keep the messages of the run
    # that solved them.
    messages = [m for r in results if r.thread_id for m in pool.history(thread_id=r.thread_id)]
    tracker.log_text(run_id, "".join(m.model_dump_json() + "\n" for m in messages), "messages.jsonl")
    warnings = _no_code_warnings(label, seed, results)
    if warnings:
        tracker.set_tags(run_id, {"critiquelab.warnings": "\n".join(warnings)})
    # Last: the digest says "everything above is logged", so a kill before it relogs on resume.
    tracker.set_tags(run_id, {RESULTS_TAG: results_digest(results)})
    tracker.finish(run_id)
    return ChildRun(label, seed, run_id, results, metrics, warnings)


def run_experiment(
    spec: ExperimentSpec,
    *,
    home: Path | None = None,
    fresh: bool = False,
    cache: bool = True,
    progress: bool = True,
    compare: bool | None = None,
) -> ExperimentResult:
    """Run ``spec`` and return its results; everything is also logged to MLflow under ``home``.

    Input is validated (dataset, pipelines, model) before any run is created. ``fresh`` ignores
    earlier checkpoints of the same configuration; ``cache=False`` bypasses the LM cache.
    ``compare`` ends the run with :func:`experiments.compare.compare_runs` on its pipelines
    (default: when it has two or more). The parent run is finished only after that, so a run
    killed at any point — the comparison included — is resumed by the same call.
    """
    home = home or default_data_dir()
    uri = tracking_uri(home, spec.tracking.uri)
    problems = load_inputs(spec, uri)
    check_warm_starts(spec, problems, home)
    identity = resolve_model(spec.model)
    key = checkpoint_key(spec, identity, uri)
    store = checkpoint_store(spec, identity, key, home, uri)
    if fresh and store.directory.exists():
        store.directory.rename(store.directory.with_name(f"{store.directory.name}.old-{int(time.time())}"))
    role_models = RoleModels(spec, home, cache)
    with (
        contextlib.closing(_LazyLM(identity, spec, home, cache)) as lazy_lm,
        contextlib.closing(role_models),
        _open_pool(spec, home) as pool,
        contextlib.closing(open_executor(spec, home, cache)) as executor,
    ):
        wanted = {p.task_id for p in problems}
        if any(wanted - set(store.load(p.display_name, s)) for p in spec.pipelines for s in spec.seeds):
            lazy_lm.get()  # start and check the models (and the cluster) before any run exists
            role_models.start()
            executor.start()
        tracker = Tracker(home, spec.name, uri)
        parent_id = open_parent_run(
            tracker, spec, identity, key, problems, resume=not fresh, served_by=lazy_lm.served_by()
        )
        result = ExperimentResult(tracker.experiment_id, parent_id)
        siblings = tracker.runs_tagged({PARENT_TAG: parent_id})
        try:
            for pipeline_spec in spec.pipelines:
                for seed in spec.seeds:
                    result.children.append(_run_child(
                        tracker, store, parent_id, siblings, spec, pipeline_spec, seed, problems,
                        lazy_lm, role_models, pool, executor, progress, result.children, home,
                    ))
        except BaseException:
            tracker.finish(parent_id, "KILLED")
            raise
    try:
        tracker.log_frame(parent_id, result.summary(), "summary")
        if compare or (compare is None and len(spec.pipelines) > 1):
            from experiments.compare import compare_runs

            result.comparison = compare_runs(parent_id, home=home, tracking=uri)
    except BaseException:
        tracker.finish(parent_id, "KILLED")
        raise
    tracker.finish(parent_id)
    return result


def _open_pool(spec: ExperimentSpec, home: Path) -> MessagePool:
    """The experiment's message pool; closing it flushes every message to the store."""
    if not spec.pool.persist:
        return MessagePool()
    from pipelines.pool.chroma_process import ChromaProcessStore  # Chroma in a child: off the agents' CPU

    if spec.pool.chroma_url:
        return MessagePool(ChromaProcessStore(url=spec.pool.chroma_url))
    return MessagePool(ChromaProcessStore(home / "chroma"))
