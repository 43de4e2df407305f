"""Run an experiment: pipelines × seeds over a dataset, one MLflow child run each under a
parent run, every finished problem checkpointed so a killed run resumes where it stopped."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from critiquelab.eval.datasets import load_problems
from critiquelab.eval.problems import Problem
from critiquelab.experiments.checkpoints import (
    CheckpointStore,
    checkpoint_key,
    checkpoint_store,
    input_fingerprints,
)
from critiquelab.experiments.child_runs import run_children
from critiquelab.experiments.child_steps import ChildContext, ChildRun, make_pipeline, run_child
from critiquelab.experiments.controls import marked_label
from critiquelab.experiments.executors.factory import open_executor
from critiquelab.experiments.executors.job import Executor
from critiquelab.experiments.memory_run import check_warm_starts, memory_of
from critiquelab.experiments.paths import data_dir as default_data_dir
from critiquelab.experiments.serving.lazy_lm import LazyLM
from critiquelab.experiments.serving.provision import resolve_model
from critiquelab.experiments.serving.role_models import RoleModels
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.experiments.tracking.local_store import check_writable_store
from critiquelab.experiments.tracking.run_records import open_parent_run
from critiquelab.experiments.tracking.store import PARENT_TAG, Tracker, check_tracking_server, tracking_uri
from critiquelab.pipelines.budget import TokenBudgetParams, budget_source
from critiquelab.runtime.memory.bank import memory_dir
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.store_lock import HeldStores


@dataclass
class ExperimentResult:
    experiment_id: str
    parent_run_id: str
    children: list[ChildRun] = field(default_factory=list)
    # critiquelab.experiments.compare.runs.ComparisonResult, when the run compared its pipelines
    comparison: Any = None

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
        its calls and tokens), ``schema_version`` (the stored result schema, critiquelab.eval.result_schema),
        and ``extra.<figure>`` for each figure the pipeline's outcome model declares (empty where
        another pipeline's row has no such figure). Rows come in run order: pipeline by pipeline,
        seed by seed, problems in the dataset's order."""
        from critiquelab.experiments.problems_frame import problems_frame

        return problems_frame(self.children)


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
    ``compare`` ends the run with :func:`critiquelab.experiments.compare.runs.compare_runs` on its pipelines
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
        if fresh or _anything_to_solve(spec, problems, store):
            _start_services(spec, uri, lazy_lm, role_models, executor)
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
            ctx = ChildContext(
                spec=spec, problems=problems, home=home, tracker=tracker, store=store, parent_id=parent_id,
                siblings=tracker.runs_tagged({PARENT_TAG: parent_id}), lazy_lm=lazy_lm,
                role_models=role_models, pool=pool, executor=executor, show_progress=progress,
                stop=threading.Event(), banks_lock=threading.Lock(),
            )
            result.children = _run_all_children(ctx)
    _finish_parent(spec, result, tracker, home, uri, compare)
    return result


def _anything_to_solve(spec: ExperimentSpec, problems: list[Problem], store: CheckpointStore) -> bool:
    """Whether some pipeline × seed has a problem its checkpoints do not hold."""
    wanted = {p.task_id for p in problems}
    pending = (wanted - set(store.load(p.display_name, s)) for p in spec.pipelines for s in spec.seeds)
    return any(pending)


def _start_services(
    spec: ExperimentSpec, uri: str, lazy_lm: LazyLM, role_models: RoleModels, executor: Executor
) -> None:
    """What refuses without starting anything first (a cluster address, a tracking server), so
    that a refused start leaves no model server's log behind either; then the models and the
    cluster, started and checked before any run exists."""
    executor.check()
    check_tracking_server(uri, spec.name)
    lazy_lm.get()
    role_models.start()
    executor.start()


def _run_all_children(ctx: ChildContext) -> list[ChildRun]:
    """Every pipeline × seed, ``parallel_runs`` at once; a child whose token budget is another's
    measurement waits for it. An error marks the open runs (parent included) KILLED."""
    spec = ctx.spec
    try:
        return run_children(
            lambda child, finished: run_child(ctx, child[0], child[1], finished),
            [(pipeline_spec, seed) for pipeline_spec in spec.pipelines for seed in spec.seeds],
            at_once=spec.parallel_runs, stop=ctx.stop,
            waits_for_earlier=lambda child: budget_source(child[0].params) is not None,
        )
    except BaseException:
        ctx.tracker.kill_open_runs()  # the parent, and a child caught before it could finish
        raise


def _finish_parent(
    spec: ExperimentSpec, result: ExperimentResult, tracker: Tracker, home: Path, uri: str,
    compare: bool | None,
) -> None:
    """The summary table and (when asked, or for two pipelines or more) the comparison, then the
    parent marked finished: a kill before that resumes with the same call."""
    parent_id = result.parent_run_id
    try:
        tracker.log_frame(parent_id, result.summary(), "summary")
        if compare or (compare is None and len(spec.pipelines) > 1):
            from critiquelab.experiments.compare.runs import compare_runs

            result.comparison = compare_runs(parent_id, home=home, tracking=uri)
    except BaseException:
        tracker.kill_open_runs()
        raise
    tracker.finish(parent_id)


def _check_chroma_server(spec: ExperimentSpec) -> None:
    """A Chroma server the experiment uses (its pool, a pipeline's memory) must answer now, before
    the models start or anything is written."""
    url = spec.pool.chroma_url
    if url and (spec.pool.persist or any(memory_of(p) for p in spec.pipelines)):
        from critiquelab.runtime.pool.chroma_store import check_chroma_server

        check_chroma_server(url)


def _open_pool(spec: ExperimentSpec, home: Path) -> MessagePool:
    """The experiment's message pool; closing it flushes every message to the store."""
    if not spec.pool.persist:
        return MessagePool()
    from critiquelab.runtime.pool.chroma_process import (
        ChromaProcessStore,  # Chroma in a child: off the agents' CPU
    )

    if spec.pool.chroma_url:
        return MessagePool(ChromaProcessStore(url=spec.pool.chroma_url))
    return MessagePool(ChromaProcessStore(home / "chroma"))
