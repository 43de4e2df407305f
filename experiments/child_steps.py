"""One child run of an experiment (a pipeline × seed) as the stages it goes through, in order:
resume (its MLflow run, params resolved from earlier children, checkpointed problems), params,
pipeline and memory, solving (progress, traces, checkpoints), metrics, artefacts, then warnings
and the results' digest. :func:`run_child` reads as that list; each stage is a method of
:class:`ChildSteps`."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import dspy

from critiquelab.core.errors import UserError
from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult, ResolvedParams, results_table
from critiquelab.eval.summary import summarize
from critiquelab.experiments.checkpoints import CheckpointStore
from critiquelab.experiments.child_runs import RunsStopped
from critiquelab.experiments.controls import marked_label
from critiquelab.experiments.executors.job import Executor, SolveJob
from critiquelab.experiments.memory_run import memory_metrics, memory_of, open_bank, run_order, with_memory
from critiquelab.experiments.progress import ProgressBar
from critiquelab.experiments.reply_warnings import refuse_if_faulty
from critiquelab.experiments.run_warnings import child_run_warnings
from critiquelab.experiments.serving.lazy_lm import LazyLM
from critiquelab.experiments.serving.role_models import RoleModels, models_by_role, usage_by_model
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.experiments.spec.pipeline_spec import PipelineSpec
from critiquelab.experiments.tracking.run_records import child_run, results_digest
from critiquelab.experiments.tracking.store import RESULTS_TAG, WARNINGS_TAG, Tracker, flatten
from critiquelab.experiments.tracking.traces import ProblemTracer, trace_checkpointed
from critiquelab.pipelines.budget import TokenBudgetParams
from critiquelab.pipelines.controls import CONTROL_TAG, NO_CONTROL, control_of
from critiquelab.pipelines.params import PipelineParams
from critiquelab.pipelines.registry import build_pipeline, outcome_model
from critiquelab.pipelines.with_memory.task_hook import WithMemory
from critiquelab.runtime.memory.bank import MemoryBank
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.pool.message_pool import MessagePool

if TYPE_CHECKING:
    from mlflow.entities import Run


@dataclass
class ChildRun:
    """One pipeline × seed: its MLflow run, per-problem results and aggregate metrics."""

    pipeline: str
    seed: int
    run_id: str
    results: list[ProblemResult]
    metrics: dict[str, float]
    warnings: list[str] = field(default_factory=list)  # what may make its numbers misleading
    control: str = NO_CONTROL  # a positive control (critiquelab.pipelines.controls) is shown as one


def make_pipeline(
    name: str, params: PipelineParams, prompts: str | None = None, registry_uri: str | None = None
) -> dspy.Module:
    """A registered pipeline built from its checked params, with exported prompts (a directory,
    ``program.json`` or ``prompts:/`` registry URIs) loaded into it if ``prompts`` names any."""
    pipeline = build_pipeline(name, params)
    if prompts:
        from critiquelab.optimizers.export import load_prompts_into

        load_prompts_into(pipeline, prompts, registry_uri=registry_uri)
    return pipeline


def resolve_params(
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
class ChildContext:
    """What every child run (pipeline × seed) of one experiment shares."""

    spec: ExperimentSpec
    problems: list[Problem]  # in the dataset's order; each child puts them in its run order
    home: Path
    tracker: Tracker
    store: CheckpointStore
    parent_id: str
    siblings: list[Run]  # the parent's child runs logged before (a resumed run reopens them)
    lazy_lm: LazyLM
    role_models: RoleModels
    pool: MessagePool
    executor: Executor
    show_progress: bool
    stop: threading.Event  # set when another child failed or the run was stopped (parallel_runs)
    # Chroma keeps one client per store directory in a process, made and dropped without a lock of
    # its own: children running at once open and close their memory banks one at a time.
    banks_lock: threading.Lock


def run_child(
    ctx: ChildContext, pipeline_spec: PipelineSpec, seed: int, finished: list[ChildRun]
) -> ChildRun:
    """One pipeline × seed, stage by stage (each a method of :class:`ChildSteps`, in this order)."""
    child = ChildSteps.begin(ctx, pipeline_spec, seed, finished)
    kept = child.kept_as_it_was()
    if kept is not None:
        return kept
    child.log_params()
    pipeline, bank = child.build_pipeline()
    results = child.solve(pipeline, bank)
    metrics = child.measure(results, bank)
    child.log_artefacts(results, metrics)
    return child.finish(results, metrics)


@dataclass
class ChildSteps:
    """One child run's state across its stages: its run, its problems in run order, what its
    checkpoints already hold and what it resolved from the runs before it."""

    ctx: ChildContext
    spec: PipelineSpec
    seed: int
    label: str
    control: str
    problems: list[Problem]  # in this child's run order
    run_id: str
    logged: Run | None  # the MLflow run an earlier (killed or finished) run of this child left
    params: PipelineParams  # what the pipeline runs with (a measured token budget resolved)
    resolved: ResolvedParams
    done: dict[str, ProblemResult]  # by task id: checkpointed, then each problem as it finishes
    memory: MemoryConfig | None = None
    started: float = 0.0  # time.monotonic() when solving began: the run's wall time

    @classmethod
    def begin(
        cls, ctx: ChildContext, pipeline_spec: PipelineSpec, seed: int, finished: list[ChildRun]
    ) -> ChildSteps:
        """Resume: the child's run (reused or new), its params and its checkpointed problems;
        strict: nothing faulty is reported, a problem kept by an earlier run without it neither."""
        label = pipeline_spec.display_name
        control = control_of(pipeline_spec.params)
        problems = run_order(ctx.problems, ctx.spec.order_seed, seed)
        run_id, logged = child_run(ctx.tracker, ctx.parent_id, ctx.siblings, label, seed)
        params, resolved = resolve_params(pipeline_spec, seed, finished)
        done = ctx.store.load(label, seed, resolved)
        kept = [done[p.task_id] for p in problems if p.task_id in done]
        refuse_if_faulty(ctx.spec.strict, label, seed, kept, checkpointed=True)
        return cls(ctx, pipeline_spec, seed, label, control, problems, run_id, logged, params, resolved, done)

    @property
    def pending(self) -> list[Problem]:
        return [p for p in self.problems if p.task_id not in self.done]

    def kept_as_it_was(self) -> ChildRun | None:
        """A finished run whose every problem is checkpointed and whose logged results are these
        (its digest) is left as it was; None: the child runs (or relogs)."""
        if self.pending or self.logged is None or self.logged.info.status != "FINISHED":
            return None
        results = [self.done[p.task_id] for p in self.problems]
        if self.logged.data.tags.get(RESULTS_TAG) != results_digest(results):
            return None
        metrics = {**summarize(results, outcome_model(self.spec.name).run_metrics),
                   "wall_time_s": self.logged.data.metrics.get("wall_time_s", 0.0)}
        warnings = child_run_warnings(self.ctx.spec, self.label, self.seed, results)
        return ChildRun(self.label, self.seed, self.run_id, results, metrics, warnings, self.control)

    def log_params(self) -> None:
        """Params: the spec's, what was resolved, and a positive control's tag."""
        tracker, run_id = self.ctx.tracker, self.run_id
        if self.logged is not None:
            tracker.reopen(run_id)
        tracker.log_params(run_id, {
            "pipeline": self.spec.name, "pipeline.label": self.label, "seed": self.seed,
            "dataset.split": self.ctx.spec.dataset.split,
            **flatten(self.spec.params.model_dump(), "pipeline.params."),
        })
        if isinstance(self.params, TokenBudgetParams) and self.resolved.token_budget is not None:
            tracker.log_params(run_id, flatten(self.params.running_values(), "pipeline.resolved."))
        if self.control != NO_CONTROL:  # a positive control: named as one wherever its results are shown
            tracker.set_tags(run_id, {CONTROL_TAG: self.control})

    def build_pipeline(self) -> tuple[dspy.Module | WithMemory, MemoryBank | None]:
        """The pipeline with its exported prompts and, when memory is on, its memory bank."""
        ctx = self.ctx
        pipeline = make_pipeline(self.spec.name, self.params, ctx.spec.prompts_of(self.spec), ctx.tracker.uri)
        self.memory = memory_of(self.spec)
        with ctx.banks_lock:
            bank = open_bank(ctx.home, self.memory, ctx.spec.pool.chroma_url) if self.memory else None
        if self.memory and bank:
            pipeline = with_memory(pipeline, bank, self.memory, self.run_id)
        return pipeline, bank

    def solve(self, pipeline: dspy.Module | WithMemory, bank: MemoryBank | None) -> list[ProblemResult]:
        """The pending problems solved (progress, traces, checkpoints); every result in run order.
        On any error the bank is closed and the run marked KILLED."""
        ctx = self.ctx
        bar = ProgressBar(f"{marked_label(self.label, self.control)} seed={self.seed}",
                          total=len(self.problems), enabled=ctx.show_progress)
        bar.resumed([self.done[task.task_id] for task in self.problems if task.task_id in self.done])
        self.started = time.monotonic()
        pending = self.pending
        tracer: ProblemTracer | None = None
        traced: set[str] = set()
        try:
            if pending:
                tracer, traced = self._solve_pending(pipeline, pending, bar)
        except BaseException:
            bar.close()
            if bank:
                with ctx.banks_lock:
                    bank.close()
            ctx.tracker.finish(self.run_id, "KILLED")
            raise
        bar.close()
        results = [self.done[p.task_id] for p in self.problems]
        if tracer is not None and len(pending) < len(self.problems):  # resumed: some came from checkpoints
            pending_ids = {p.task_id for p in pending}
            trace_checkpointed(tracer, results, ctx.pool.history, traced | {r.task_id for r in results
                                                                             if r.task_id in pending_ids})
        return results

    def _solve_pending(
        self, pipeline: dspy.Module | WithMemory, pending: list[Problem], bar: ProgressBar
    ) -> tuple[ProblemTracer | None, set[str]]:
        """``pending`` solved on the executor: each result refused if strict finds it faulty, then
        traced, checkpointed and counted. Returns the tracer and the tasks it had traced before."""
        ctx, spec, run_id, label, seed = self.ctx, self.ctx.spec, self.run_id, self.label, self.seed
        tracer: ProblemTracer | None = None
        traced: set[str] = set()
        lm = ctx.lazy_lm.get()
        if spec.tracking.traces:
            tracer = ProblemTracer(ctx.tracker.uri, ctx.tracker.experiment_id, run_id, str(lm.model))
            traced = tracer.traced_tasks() if self.logged is not None else set()
        if spec.model.send_seed:
            lm = lm.copy(seed=seed)
        role_lms = ctx.role_models.lms_for(self.spec, lm, seed)
        job = SolveJob(pipeline, lm, label, seed, spec.execution.timeout_s, run_id,
                       role_lms=role_lms, in_order=self.memory is not None)
        solving = ctx.executor.solve(job, pending, ctx.pool)
        with contextlib.closing(solving):  # an error here stops the problems in flight too
            for result in solving:
                refuse_if_faulty(spec.strict, label, seed, [result])  # before it is checkpointed
                if tracer is not None and result.task_id not in traced:  # queued; see close()
                    tracer.submit(result, ctx.pool.history(thread_id=result.thread_id), time.time())
                result.resolved_params = self.resolved
                ctx.store.append(result)
                self.done[result.task_id] = result
                bar.update(result)
                if ctx.stop.is_set():  # another child failed, or the run was stopped
                    raise RunsStopped(f"{label} seed {seed}: stopped with the run")
        if tracer is not None:
            tracer.close()  # every trace stored before the run is marked finished
        return tracer, traced

    def measure(self, results: list[ProblemResult], bank: MemoryBank | None) -> dict[str, float]:
        """Metrics: the outcome model's, tokens by model, wall time and (memory on) the memory's,
        whose error blocks are logged beside them; the bank is closed here."""
        ctx = self.ctx
        metrics = summarize(results, outcome_model(self.spec.name).run_metrics)
        metrics.update(usage_by_model(results, models_by_role(self.spec), ctx.spec.model.id))
        metrics["wall_time_s"] = time.monotonic() - self.started
        if self.memory and bank:
            try:
                memory_values, blocks = memory_metrics(bank, self.memory, self.run_id, results)
            finally:
                with ctx.banks_lock:
                    bank.close()
            metrics.update(memory_values)
            ctx.tracker.log_text(self.run_id, json.dumps(blocks, indent=1), "memory_error_blocks.json")
        return metrics

    def log_artefacts(self, results: list[ProblemResult], metrics: dict[str, float]) -> None:
        """The metrics, the per-problem table and the message log."""
        tracker, pool = self.ctx.tracker, self.ctx.pool
        tracker.log_metrics(self.run_id, metrics, only_changed=True)
        tracker.log_frame(self.run_id, results_table(results), "problems")
        # By thread, not by run id: problems resumed from checkpoints keep the messages of the run
        # that solved them.
        messages = [m for r in results if r.thread_id for m in pool.history(thread_id=r.thread_id)]
        tracker.log_text(self.run_id, "".join(m.model_dump_json() + "\n" for m in messages), "messages.jsonl")

    def finish(self, results: list[ProblemResult], metrics: dict[str, float]) -> ChildRun:
        """Warnings, then the results' digest, then the run marked finished."""
        tracker = self.ctx.tracker
        warnings = child_run_warnings(self.ctx.spec, self.label, self.seed, results)
        if warnings:
            tracker.set_tags(self.run_id, {WARNINGS_TAG: "\n".join(warnings)})
        # Last: the digest says "everything above is logged", so a kill before it relogs on resume.
        tracker.set_tags(self.run_id, {RESULTS_TAG: results_digest(results)})
        tracker.finish(self.run_id)
        return ChildRun(self.label, self.seed, self.run_id, results, metrics, warnings, self.control)
