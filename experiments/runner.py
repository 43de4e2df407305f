"""Run an experiment: pipelines × seeds over a dataset, one MLflow child run each under a
parent run, every finished problem checkpointed so a killed run resumes where it stopped."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError
from eval.datasets import load_problems
from eval.problems import Problem
from eval.results import ProblemResult, ResolvedParams, results_table
from eval.summary import summarize
from experiments.checkpoints import CheckpointStore, checkpoint_key, checkpoint_store, input_fingerprints
from experiments.child_runs import RunsStopped, run_children
from experiments.controls import marked_label
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
from experiments.progress import ProgressBar
from experiments.reply_warnings import refuse_if_faulty
from experiments.run_warnings import child_run_warnings
from experiments.serving.lazy_lm import LazyLM
from experiments.serving.provision import resolve_model
from experiments.serving.role_models import RoleModels, models_by_role, usage_by_model
from experiments.spec.experiment import ExperimentSpec
from experiments.spec.pipeline_spec import PipelineSpec
from experiments.tracking.local_store import check_writable_store
from experiments.tracking.run_records import child_run, open_parent_run, results_digest
from experiments.tracking.store import (
    PARENT_TAG,
    RESULTS_TAG,
    WARNINGS_TAG,
    Tracker,
    check_tracking_server,
    flatten,
    tracking_uri,
)
from experiments.tracking.traces import ProblemTracer, trace_checkpointed
from pipelines.budget import TokenBudgetParams, budget_source
from pipelines.controls import CONTROL_TAG, NO_CONTROL, control_of
from pipelines.params import PipelineParams
from pipelines.registry import build_pipeline, outcome_model
from runtime.memory.bank import memory_dir
from runtime.pool.message_pool import MessagePool
from runtime.pool.store_lock import HeldStores


@dataclass
class ChildRun:
    """One pipeline × seed: its MLflow run, per-problem results and aggregate metrics."""

    pipeline: str
    seed: int
    run_id: str
    results: list[ProblemResult]
    metrics: dict[str, float]
    warnings: list[str] = field(default_factory=list)  # what may make its numbers misleading
    control: str = NO_CONTROL  # a positive control (pipelines.controls) is shown as one


@dataclass
class ExperimentResult:
    experiment_id: str
    parent_run_id: str
    children: list[ChildRun] = field(default_factory=list)
    comparison: Any = None  # experiments.compare.runs.ComparisonResult, when the run compared its pipelines

    @property
    def warnings(self) -> list[str]:
        """One line each; also tagged on the child run they concern."""
        return [w for c in self.children for w in c.warnings]

    def summary(self) -> Any:
        """A pandas DataFrame: one row per pipeline × seed."""
        import pandas as pd

        rows = [
            {
                "pipeline": marked_label(c.pipeline, c.control), "seed": c.seed,
                "pass@1": round(c.metrics["pass_at_1"], 4),
                "passed": int(c.metrics["problems_passed"]), "problems": int(c.metrics["problems"]),
                "tokens/problem": round(c.metrics["tokens_per_problem"], 1),
                "lm_calls": int(c.metrics["lm_calls"]), "run_id": c.run_id,
            }
            for c in self.children
        ]
        return pd.DataFrame(rows)

    @property
    def problems(self) -> Any:
        """A pandas DataFrame: one row per problem × pipeline × seed, what compare's statistics
        are computed from (``result.comparison.problems`` adds compare's ``messages`` column).

        Columns: ``pipeline`` (the label, marked for a positive control), ``seed``, ``run_id``
        (the child run), ``task_id``, ``status`` (passed / failed / timed_out / error), ``reason``
        and ``detail`` (why it failed), ``passed`` (bool: the hidden tests passed), ``iterations``,
        ``prompt_tokens``, ``completion_tokens``, ``total_tokens``, ``lm_calls``,
        ``cached_lm_calls``, ``latency_s``, ``parsed`` (False: some role's reply was unparseable),
        ``isolation`` (the sandbox's level), ``final_code``, ``usage_by_role`` (JSON text: per role
        its calls and tokens), and ``extra.<figure>`` for each figure the pipeline's outcome model
        declares (empty where another pipeline's row has no such figure). Rows come in run
        order: pipeline by pipeline, seed by seed, problems in the dataset's order."""
        from experiments.problems_frame import problems_frame

        return problems_frame(self.children)


def make_pipeline(
    name: str, params: PipelineParams, prompts: str | None = None, registry_uri: str | None = None
) -> Any:
    """A registered pipeline built from its checked params, with exported prompts (a directory,
    ``program.json`` or ``prompts:/`` registry URIs) loaded into it if ``prompts`` names any."""
    pipeline = build_pipeline(name, params)
    if prompts:
        from optimizers.export import load_prompts_into

        load_prompts_into(pipeline, prompts, registry_uri=registry_uri)
    return pipeline


def load_inputs(spec: ExperimentSpec, registry_uri: str) -> tuple[list[Problem], list[str]]:
    """The spec's problems, with the notice of a detected dataset format (if any) for the
    caller to show once nothing can refuse the start: bad input fails here, before anything is
    written. Names and params were checked with the spec; what only a built pipeline can check is
    whether exported prompts match its roles, so a pipeline that loads prompts is built for that
    (its runs build their own). A local MLflow store file that cannot be one is refused first."""
    check_writable_store(registry_uri)
    notices: list[str] = []
    problems = load_problems(
        spec.dataset.location, spec.dataset.fields, spec.dataset.limit, spec.dataset.task_ids,
        dataset_format=spec.dataset.format, challenge_tests=spec.dataset.challenge_tests,
        split=spec.dataset.split, on_notice=notices.append,
    )
    for pipeline_spec in spec.pipelines:
        prompts = spec.prompts_of(pipeline_spec)
        if prompts:
            params = pipeline_spec.params
            if isinstance(params, TokenBudgetParams) and params.token_budget_from is not None:
                params = params.with_measured_budget(0.0)  # resolved per run; roles do not depend on it
            make_pipeline(pipeline_spec.name, params, prompts, registry_uri)
    return problems, notices


def _resolve_params(
    spec: PipelineSpec, seed: int, finished: list[ChildRun]
) -> tuple[PipelineParams, ResolvedParams]:
    """``token_budget_from: LABEL`` becomes ``token_budget``: that pipeline's measured tokens per
    problem under the same seed, so an equal-compute baseline spends what it is compared to.
    Returns the params the pipeline runs with and what was resolved."""
    params = spec.params
    if not isinstance(params, TokenBudgetParams) or params.token_budget_from is None:
        return params, ResolvedParams()
    source = params.token_budget_from
    match = next((c for c in finished if c.pipeline == source and c.seed == seed), None)
    if match is None:
        raise UserError(f"token_budget_from: no finished run of '{source}' with seed {seed}")
    budget = match.metrics["tokens_per_problem"]
    return params.with_measured_budget(budget), ResolvedParams(token_budget=budget)


@dataclass(frozen=True)
class _ChildContext:
    """What every child run (pipeline × seed) of one experiment shares."""

    spec: ExperimentSpec
    problems: list[Problem]  # in the dataset's order; each child puts them in its run order
    home: Path
    tracker: Tracker
    store: CheckpointStore
    parent_id: str
    siblings: list[Any]  # the parent's child runs logged before (a resumed run reopens them)
    lazy_lm: LazyLM
    role_models: RoleModels
    pool: MessagePool
    executor: Executor
    show_progress: bool
    stop: threading.Event  # set when another child failed or the run was stopped (parallel_runs)
    # Chroma keeps one client per store directory in a process, made and dropped without a lock of
    # its own: children running at once open and close their memory banks one at a time.
    banks_lock: threading.Lock


def _run_child(
    ctx: _ChildContext, pipeline_spec: PipelineSpec, seed: int, finished: list[ChildRun]
) -> ChildRun:
    spec, tracker, store, pool = ctx.spec, ctx.tracker, ctx.store, ctx.pool
    label = pipeline_spec.display_name
    control = control_of(pipeline_spec.params)
    problems = run_order(ctx.problems, spec.order_seed, seed)
    run_id, logged = child_run(tracker, ctx.parent_id, ctx.siblings, label, seed)
    params, resolved = _resolve_params(pipeline_spec, seed, finished)
    done = store.load(label, seed, resolved)
    # strict: nothing faulty is reported, a problem kept by an earlier run without it neither
    refuse_if_faulty(spec.strict, label, seed, [done[p.task_id] for p in problems if p.task_id in done],
                     checkpointed=True)
    pending = [p for p in problems if p.task_id not in done]
    pending_ids = {p.task_id for p in pending}
    if not pending and logged is not None and logged.info.status == "FINISHED":
        results = [done[p.task_id] for p in problems]
        if logged.data.tags.get(RESULTS_TAG) == results_digest(results):
            metrics = {**summarize(results, outcome_model(pipeline_spec.name).run_metrics),
                       "wall_time_s": logged.data.metrics.get("wall_time_s", 0.0)}
            warnings = child_run_warnings(spec, label, seed, results)
            return ChildRun(label, seed, run_id, results, metrics, warnings, control)  # left as it was
    if logged is not None:
        tracker.reopen(run_id)
    tracker.log_params(run_id, {
        "pipeline": pipeline_spec.name, "pipeline.label": label, "seed": seed,
        "dataset.split": spec.dataset.split, **flatten(pipeline_spec.params.model_dump(), "pipeline.params."),
    })
    if isinstance(params, TokenBudgetParams) and resolved.token_budget is not None:
        tracker.log_params(run_id, flatten(params.running_values(), "pipeline.resolved."))
    if control != NO_CONTROL:  # a positive control: named as one wherever its results are shown
        tracker.set_tags(run_id, {CONTROL_TAG: control})
    pipeline = make_pipeline(pipeline_spec.name, params, spec.prompts_of(pipeline_spec), tracker.uri)
    memory = memory_of(pipeline_spec)
    with ctx.banks_lock:
        bank = open_bank(ctx.home, memory, spec.pool.chroma_url) if memory else None
    if memory and bank:
        pipeline = with_memory(pipeline, bank, memory, run_id)
    bar = ProgressBar(f"{marked_label(label, control)} seed={seed}", total=len(problems),
                      enabled=ctx.show_progress)
    bar.resumed([done[task.task_id] for task in problems if task.task_id in done])
    start = time.monotonic()
    tracer, traced = None, set()
    try:
        if pending:
            lm = ctx.lazy_lm.get()
            if spec.tracking.traces:
                tracer = ProblemTracer(tracker.uri, tracker.experiment_id, run_id, str(lm.model))
                traced = tracer.traced_tasks() if logged is not None else set()
            if spec.model.send_seed:
                lm = lm.copy(seed=seed)
            role_lms = ctx.role_models.lms_for(pipeline_spec, lm, seed)
            job = SolveJob(pipeline, lm, label, seed, spec.execution.timeout_s, run_id,
                           role_lms=role_lms, in_order=memory is not None)
            solving = ctx.executor.solve(job, pending, pool)
            with contextlib.closing(solving):  # an error here stops the problems in flight too
                for result in solving:
                    refuse_if_faulty(spec.strict, label, seed, [result])  # before it is checkpointed
                    if tracer is not None and result.task_id not in traced:  # queued; see close()
                        tracer.submit(result, pool.history(thread_id=result.thread_id), time.time())
                    result.resolved_params = resolved
                    store.append(result)
                    done[result.task_id] = result
                    bar.update(result)
                    if ctx.stop.is_set():  # another child failed, or the run was stopped
                        raise RunsStopped(f"{label} seed {seed}: stopped with the run")
            if tracer is not None:
                tracer.close()  # every trace stored before the run is marked finished
    except BaseException:
        bar.close()
        if bank:
            with ctx.banks_lock:
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
        try:
            memory_values, blocks = memory_metrics(bank, memory, run_id, results)
        finally:
            with ctx.banks_lock:
                bank.close()
        metrics.update(memory_values)
        tracker.log_text(run_id, json.dumps(blocks, indent=1), "memory_error_blocks.json")
    tracker.log_metrics(run_id, metrics, only_changed=True)
    tracker.log_frame(run_id, results_table(results), "problems")
    # By thread, not by run id: problems resumed from checkpoints keep the messages of the run
    # that solved them.
    messages = [m for r in results if r.thread_id for m in pool.history(thread_id=r.thread_id)]
    tracker.log_text(run_id, "".join(m.model_dump_json() + "\n" for m in messages), "messages.jsonl")
    warnings = child_run_warnings(spec, label, seed, results)
    if warnings:
        tracker.set_tags(run_id, {WARNINGS_TAG: "\n".join(warnings)})
    # Last: the digest says "everything above is logged", so a kill before it relogs on resume.
    tracker.set_tags(run_id, {RESULTS_TAG: results_digest(results)})
    tracker.finish(run_id)
    return ChildRun(label, seed, run_id, results, metrics, warnings, control)


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
    earlier checkpoints of the same configuration; ``cache=False`` asks the model again for every
    request and keeps its new answers in place of the cached ones.
    ``compare`` ends the run with :func:`experiments.compare.runs.compare_runs` on its pipelines
    (default: when it has two or more). The parent run is finished only after that, so a run
    killed at any point — the comparison included — is resumed by the same call.
    """
    home = home or default_data_dir()
    # Held for the whole run: another critiquelab process on the same local Chroma store is
    # refused before this one writes anything, and none can open it between two child runs.
    with HeldStores(_local_stores(spec, home)) as stores:
        stores.take(create=False)  # a store locked before: refused now, before the inputs load
        return _run_experiment(spec, home, stores, fresh=fresh, cache=cache, progress=progress,
                               compare=compare)


def _local_stores(spec: ExperimentSpec, home: Path) -> list[Path]:
    """The local Chroma stores a run of ``spec`` opens (none on a Chroma server): the pool's
    and, when a pipeline has memory, the memory's."""
    if spec.pool.chroma_url:
        return []
    stores = [home / "chroma"] if spec.pool.persist else []
    if any(memory_of(p) for p in spec.pipelines):
        stores.append(memory_dir(home) / "chroma")
    return stores


def _run_experiment(
    spec: ExperimentSpec, home: Path, stores: HeldStores, *, fresh: bool, cache: bool, progress: bool,
    compare: bool | None,
) -> ExperimentResult:
    uri = tracking_uri(home, spec.tracking.uri)
    problems, dataset_notices = load_inputs(spec, uri)
    _check_chroma_server(spec)
    check_warm_starts(spec, problems, home)
    identity = resolve_model(spec.model)
    fingerprints = input_fingerprints(spec, uri)
    key = checkpoint_key(spec, identity, fingerprints)
    store = checkpoint_store(spec, identity, key, home, fingerprints)
    role_models = RoleModels(spec, home, cache)
    with (
        contextlib.closing(LazyLM(identity, spec, home, cache)) as lazy_lm,
        contextlib.closing(role_models),
        contextlib.closing(open_executor(spec, home)) as executor,
    ):
        wanted = {p.task_id for p in problems}
        pending = (wanted - set(store.load(p.display_name, s)) for p in spec.pipelines for s in spec.seeds)
        if fresh or any(pending):
            # What refuses without starting anything first (a cluster address, a tracking server),
            # so that a refused start leaves no model server's log behind either.
            executor.check()
            check_tracking_server(uri, spec.name)
            lazy_lm.get()  # start and check the models (and the cluster) before any run exists
            role_models.start()
            executor.start()
        # What can refuse the start comes before the first file: the models and the cluster
        # (above), a Chroma server (probed first thing, and the pool on it opened before the
        # tracking), the tracking (its local store is the first file). Earlier checkpoints are
        # set aside (--fresh) and a pool under the data directory opens only after all of them;
        # its lock (and the memory's) is taken before the tracking: a store another process has
        # open refuses the start before it leaves an MLflow run behind.
        with contextlib.ExitStack() as pools:
            remote_pool = spec.pool.persist and spec.pool.chroma_url is not None
            pool = pools.enter_context(_open_pool(spec, home)) if remote_pool else None
            stores.take()
            tracker = Tracker(home, spec.name, uri)
            if fresh and store.directory.exists():
                store.directory.rename(store.directory.with_name(f"{store.directory.name}.old-{time.time_ns()}"))
            if pool is None:
                pool = pools.enter_context(_open_pool(spec, home))
            for notice in dataset_notices:  # the start stands: a refusal above was the only line
                logging.getLogger(__name__).warning("%s", notice)
            parent_id = open_parent_run(
                tracker, spec, identity, key, problems, resume=not fresh, served_by=lazy_lm.served_by()
            )
            result = ExperimentResult(tracker.experiment_id, parent_id)
            ctx = _ChildContext(
                spec=spec, problems=problems, home=home, tracker=tracker, store=store, parent_id=parent_id,
                siblings=tracker.runs_tagged({PARENT_TAG: parent_id}), lazy_lm=lazy_lm,
                role_models=role_models, pool=pool, executor=executor, show_progress=progress,
                stop=threading.Event(), banks_lock=threading.Lock(),
            )
            try:
                result.children = run_children(
                    lambda child, finished: _run_child(ctx, child[0], child[1], finished),
                    [(pipeline_spec, seed) for pipeline_spec in spec.pipelines for seed in spec.seeds],
                    at_once=spec.parallel_runs, stop=ctx.stop,
                    waits_for_earlier=lambda child: budget_source(child[0].params) is not None,
                )
            except BaseException:
                tracker.kill_open_runs()  # the parent, and a child caught before it could finish
                raise
    try:
        tracker.log_frame(parent_id, result.summary(), "summary")
        if compare or (compare is None and len(spec.pipelines) > 1):
            from experiments.compare.runs import compare_runs

            result.comparison = compare_runs(parent_id, home=home, tracking=uri)
    except BaseException:
        tracker.kill_open_runs()
        raise
    tracker.finish(parent_id)
    return result


def _check_chroma_server(spec: ExperimentSpec) -> None:
    """A Chroma server the experiment uses (its pool, a pipeline's memory) must answer now, before
    the models start or anything is written."""
    url = spec.pool.chroma_url
    if url and (spec.pool.persist or any(memory_of(p) for p in spec.pipelines)):
        from runtime.pool.chroma_store import check_chroma_server

        check_chroma_server(url)


def _open_pool(spec: ExperimentSpec, home: Path) -> MessagePool:
    """The experiment's message pool; closing it flushes every message to the store."""
    if not spec.pool.persist:
        return MessagePool()
    from runtime.pool.chroma_process import ChromaProcessStore  # Chroma in a child: off the agents' CPU

    if spec.pool.chroma_url:
        return MessagePool(ChromaProcessStore(url=spec.pool.chroma_url))
    return MessagePool(ChromaProcessStore(home / "chroma"))
