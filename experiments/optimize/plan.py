"""The steps of ``critiquelab optimize`` after the split, in the order :func:`plan` gives them:
baseline val → compile → compiled val → gate → (refine) → held-out test. The module docstring of
:mod:`critiquelab.experiments.optimize.loop` says what each does and why."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import dspy

from critiquelab.experiments.optimize.context import OptimizeContext
from critiquelab.experiments.optimize.records import (
    CompileRecord,
    GateRecord,
    HeldOutRecord,
    RefineRecord,
    ScoredRecord,
)
from critiquelab.experiments.optimize.served_models import ModelRole
from critiquelab.experiments.optimize.spec import OptimizeSpec
from critiquelab.experiments.optimize.step_kinds import RunStep, Step
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.experiments.spec.pipeline_spec import PipelineSpec
from critiquelab.experiments.tracking.store import flatten, tracking_uri
from critiquelab.optimizers.compile import CompileConfig, changed_roles, compile_program, evaluate, pass_at_1
from critiquelab.optimizers.export import export_program, load_program
from critiquelab.optimizers.gate import GateDecision, gate
from critiquelab.optimizers.refine import refine_instruction
from critiquelab.optimizers.training_examples import RoleTrace, collect_from_home
from critiquelab.pipelines.registry import build_pipeline


def plan(spec: OptimizeSpec) -> list[Step[Any]]:
    """The steps ``spec`` asks for, in order."""
    steps: list[Step[Any]] = [
        ValidationRun("baseline_val", "baseline"), Compile(), ValidationRun("compiled_val", "compiled"),
        Gate(),
    ]
    if spec.refine is not None:
        steps.append(Refine())
    return [*steps, HeldOutTest()]


def _program(ctx: OptimizeContext, program_dir: str) -> dspy.Module:
    """The exported program in ``program_dir``; '' for the unoptimised pipeline."""
    if program_dir:
        return load_program(Path(program_dir))[0]
    return build_pipeline(ctx.spec.pipeline.name, ctx.spec.pipeline.params)


class ValidationRun(RunStep[ScoredRecord]):
    """``baseline_val`` / ``compiled_val``: the unoptimised pipeline or the compiled program on the
    validation split."""

    record_type = ScoredRecord

    def __init__(self, name: str, program: Literal["baseline", "compiled"]) -> None:
        self.name, self.program = name, program

    def models(self, spec: OptimizeSpec) -> frozenset[ModelRole]:
        return frozenset({"task"})

    def params(self, ctx: OptimizeContext) -> dict[str, Any]:
        return {"split": "val", "program": self.program}

    def run(self, ctx: OptimizeContext, run_id: str) -> ScoredRecord:
        program = _program(ctx, ctx.finished.compile.program_dir if self.program == "compiled" else "")
        scores = evaluate(program, ctx.problems_of(ctx.split.val), lm=ctx.models.get("task"),
                          timeout_s=ctx.spec.execution.timeout_s)
        ctx.tracker.log_text(run_id, json.dumps(scores, indent=2), "scores.json")
        return ScoredRecord(run_id=run_id, pass_at_1=pass_at_1(scores), scores=scores)


class Compile(RunStep[CompileRecord]):
    """``compile``: traces (from earlier runs, or by running on the train split) → DSPy compile;
    the program is exported and logged as the run's ``program`` artifact."""

    name = "compile"
    record_type = CompileRecord

    def models(self, spec: OptimizeSpec) -> frozenset[ModelRole]:
        return frozenset({"task", "teacher"} if spec.teacher else {"task"})

    def params(self, ctx: OptimizeContext) -> dict[str, Any]:
        optimizer = ctx.spec.optimizer
        return {"optimizer": optimizer.name, **flatten(optimizer.params.model_dump(), "optimizer.params."),
                "optimizer.roles": ",".join(optimizer.roles or ["all"])}

    def run(self, ctx: OptimizeContext, run_id: str) -> CompileRecord:
        spec, split = ctx.spec, ctx.split
        traces = _traces(ctx) if spec.optimizer.name == "traces" else []
        roles = tuple(spec.optimizer.roles) if spec.optimizer.roles else None
        config = CompileConfig(spec.optimizer.name, spec.optimizer.params, spec.execution.timeout_s,
                               spec.split.seed, log_dir=ctx.directory / "optimizer_state", roles=roles)
        metrics: dict[str, float] = {}
        original = build_pipeline(spec.pipeline.name, spec.pipeline.params)
        compiled = compile_program(
            original, config, train=ctx.problems_of(split.train), val=ctx.problems_of(split.val),
            task_lm=ctx.models.get("task"), teacher_lm=ctx.models.get("teacher") if spec.teacher else None,
            traces=traces, progress=metrics.__setitem__,
        )
        if metrics.get("failed_proposals"):
            ctx.log(f"compile: warning: {metrics['failed_proposals']:.0f} instruction proposal(s) could not "
                    "be parsed from the prompt model's reply; the current instruction stood in for them "
                    "(metric failed_proposals on this run)")
        out = ctx.directory / "program"
        export_program(compiled, out, pipeline=spec.pipeline.name, params=spec.pipeline.params.model_dump(),
                       source=run_id)
        ctx.tracker.client.log_artifacts(run_id, str(out), "program")
        demos = sum(len(predictor.demos) for _, predictor in compiled.named_predictors())
        changed = changed_roles(original, compiled)
        if not changed:
            allowed = ", ".join(roles or ["all"])
            ctx.log(f"compile: warning: no prompt changed (roles it may change: {allowed}); the compiled "
                    "program is the original, so it is not kept and not tested")
        return CompileRecord(run_id=run_id, program_dir=str(out), traces=float(len(traces)),
                             demos=float(demos), changed_roles=changed, **metrics)


def _traces(ctx: OptimizeContext) -> list[RoleTrace]:
    """Pool traces of the train split: from the runs the spec names, else from running the
    (teacher-free) pipeline on the train split now."""
    spec, train = ctx.spec, ctx.split.train
    if spec.traces.run_ids or spec.traces.experiment:
        return collect_from_home(
            ctx.home, uri=tracking_uri(ctx.home, spec.tracking.uri), run_ids=spec.traces.run_ids,
            experiment=spec.traces.experiment,
            pipeline=spec.pipeline.name if spec.traces.experiment else None, task_ids=train,
        )
    traces: list[RoleTrace] = []
    program = build_pipeline(spec.pipeline.name, spec.pipeline.params)
    evaluate(program, ctx.problems_of(train), lm=ctx.models.get("task"), timeout_s=spec.execution.timeout_s,
             traces=traces)
    return traces


class Gate(Step[GateRecord]):
    """The gate, on the parent run: the compiled program is kept only if its validation score does
    not drop (and both scores exist: :mod:`critiquelab.optimizers.gate`); a compile that changed no prompt is
    not kept. The reason is printed on every run, and tagged on the parent run."""

    name = "gate"
    record_type = GateRecord

    def resume(self, ctx: OptimizeContext) -> GateRecord:
        record = ctx.store.load(self.name, GateRecord)
        if record is None:
            record = self._decide(ctx)
            ctx.store.save(self.name, record)
        ctx.log(f"gate: kept {record.kept} ({record.reason})")
        return record

    def _decide(self, ctx: OptimizeContext) -> GateRecord:
        base, cand, compiled = ctx.finished.baseline_val, ctx.finished.compiled_val, ctx.finished.compile
        decision = (
            GateDecision(False, "compile changed no prompt: nothing optimised to keep")
            if compiled.changed_nothing
            else gate(base.pass_at_1, cand.pass_at_1, candidate="compiled program")
        )
        record = GateRecord(
            kept="compiled" if decision.keep else "baseline",
            program_dir=compiled.program_dir if decision.keep else "",
            baseline_val=base.pass_at_1, compiled_val=cand.pass_at_1, reason=decision.reason,
        )
        parent, tracker = ctx.parent_run_id, ctx.tracker
        tracker.log_metrics(parent, {"val_pass_at_1": base.pass_at_1}, step=0)
        tracker.log_metrics(parent, {"val_pass_at_1": cand.pass_at_1}, step=1)
        tracker.set_tags(parent, {"critiquelab.kept": record.kept, "critiquelab.gate": decision.reason})
        if decision.keep:
            tracker.client.log_artifacts(parent, record.program_dir, "program")
        return record


class Refine(RunStep[RefineRecord]):
    """``refine``: TextGrad refines one role's instruction of the gate's program
    (:mod:`critiquelab.optimizers.refine`), kept only if validation does not drop; logs that gate and both
    instructions."""

    name = "refine"
    record_type = RefineRecord

    def models(self, spec: OptimizeSpec) -> frozenset[ModelRole]:
        return frozenset({"refine", "task"})

    def params(self, ctx: OptimizeContext) -> dict[str, Any]:
        refine = ctx.spec.refine
        assert refine is not None  # planned only then
        return {"role": refine.role, "steps": refine.steps, "batch_size": refine.batch_size,
                "program": ctx.finished.gate.kept}

    def run(self, ctx: OptimizeContext, run_id: str) -> RefineRecord:
        # TextGrad logs every prompt to $TEXTGRAD_LOG_DIR, read once as it is imported (here):
        # in the data directory, like the model server's log, unless the user chose a place.
        os.environ.setdefault("TEXTGRAD_LOG_DIR", str(ctx.home / "logs" / "textgrad"))
        from critiquelab.optimizers.textgrad_engine import engine_from_lm

        spec, split, gate_record, tracker = ctx.spec, ctx.split, ctx.finished.gate, ctx.tracker
        assert spec.refine is not None
        val_before = gate_record.compiled_val if gate_record.kept == "compiled" else gate_record.baseline_val
        program = _program(ctx, gate_record.program_dir)
        engine = engine_from_lm(ctx.models.get("refine"),
                                cache_dir=ctx.home / "textgrad_cache" if ctx.cache else None)
        refined = refine_instruction(
            program, spec.refine.role, ctx.problems_of(split.train), ctx.problems_of(split.val),
            task_lm=ctx.models.get("task"), engine=engine, steps=spec.refine.steps,
            batch_size=spec.refine.batch_size, seed=spec.split.seed, timeout_s=spec.execution.timeout_s,
            val_before=val_before, progress=ctx.log,
        )
        tracker.log_text(run_id, refined.instruction_before, "instruction_before.txt")
        tracker.log_text(run_id, refined.instruction_after, "instruction_after.txt")
        tracker.log_text(run_id, json.dumps(refined.history, indent=2), "history.json")
        tracker.log_metrics(run_id, {"kept": float(refined.kept)})
        tracker.set_tags(run_id, {"critiquelab.gate": refined.reason})
        ctx.log(f"refine gate: {'kept' if refined.kept else 'not kept'} ({refined.reason})")
        tracker.log_metrics(ctx.parent_run_id, {"val_pass_at_1": refined.val_after}, step=2)
        candidate = ""
        if refined.instruction_after != refined.instruction_before:  # a candidate exists, kept or not
            candidate = str(ctx.directory / "program-refined")
            export_program(refined.candidate, Path(candidate), pipeline=spec.pipeline.name,
                           params=spec.pipeline.params.model_dump(), source=run_id)
            tracker.client.log_artifacts(run_id, candidate, "program")
        if refined.kept:
            tracker.client.log_artifacts(ctx.parent_run_id, candidate, "program")
            tracker.set_tags(ctx.parent_run_id, {"critiquelab.kept": "refined"})
        return RefineRecord(
            run_id=run_id, kept=refined.kept, program_dir=candidate if refined.kept else "",
            candidate_dir=candidate, val_before=refined.val_before, val_after=refined.val_after,
            instruction_after=refined.instruction_after, reason=refined.reason,
        )


class HeldOutTest(RunStep[HeldOutRecord]):
    """``test``: every optimised candidate, kept or not (the choice was made on validation; the
    test shows whether it held), and the unoptimised pipeline side by side on the held-out test
    split (never used above; checked again here), as one experiment run with ``compare``'s paired
    statistics. Its scores go on the parent run, resumed or not."""

    name = "test"
    record_type = HeldOutRecord

    def resume(self, ctx: OptimizeContext) -> HeldOutRecord:
        ctx.split.check_scoring(ctx.split.test, allow_overlap=ctx.spec.split.allow_overlap)
        record = super().resume(ctx)
        ctx.tracker.log_metrics(ctx.parent_run_id, {
            "test_pass_at_1": record.pass_at_1, "test_pass_at_1_unoptimised": record.unoptimised_pass_at_1,
        })
        ctx.tracker.log_text(ctx.parent_run_id, record.comparison, "test_comparison.md")
        return record

    def params(self, ctx: OptimizeContext) -> dict[str, Any]:
        return {"split": "test", "program": ctx.finished.kept}

    def run(self, ctx: OptimizeContext, run_id: str) -> HeldOutRecord:
        """The unoptimised pipeline and every candidate in one experiment run (same problems, model
        and seed; it serves its own model), then ``compare``'s paired statistics — the table
        researchers read for any two pipelines. The kept candidate's score is the optimisation's."""
        from critiquelab.experiments.runner import (
            run_experiment,  # the experiment machinery, only when testing
        )

        spec, test_ids, kept = ctx.spec, ctx.split.test, ctx.finished.kept
        candidates = _candidates(ctx)
        name, params = spec.pipeline.name, spec.pipeline.params
        unoptimised = spec.pipeline.display_name
        labels = {"baseline": unoptimised, **{c: f"{unoptimised}+{c}" for c in candidates}}
        pipelines = [PipelineSpec(name=name, label=unoptimised, params=params)] + [
            PipelineSpec(name=name, label=labels[c], params=params, prompts=d) for c, d in candidates.items()
        ]
        # The test half is outside the half train and val came from (dataset.split: dev).
        half = {"split": "test"} if spec.split.test == "test_half" else {}
        experiment = ExperimentSpec(
            name=f"{spec.name}-test", description=f"held-out test split of optimisation {spec.name}",
            dataset=spec.dataset.model_copy(update={"task_ids": list(test_ids), **half}), model=spec.model,
            pipelines=pipelines, execution=spec.execution, tracking=spec.tracking,
        )
        shown = " vs ".join(p.display_name for p in pipelines)
        ctx.log(f"test: {shown} on {len(test_ids)} held-out problems")
        result = run_experiment(experiment, home=ctx.home, cache=ctx.cache, progress=ctx.progress)
        by_label = {child.pipeline: child for child in result.children}
        rates = {label: child.metrics["pass_at_1"] for label, child in by_label.items()}
        comparison = result.comparison.markdown if result.comparison is not None else (
            f"Nothing to compare: pass@1 {rates[unoptimised]:.4f}.\n"
        )
        ctx.tracker.log_text(run_id, comparison, "comparison.md")
        ctx.tracker.set_tags(run_id, {"critiquelab.test_run": result.parent_run_id})
        scores = {r.task_id: r.passed for r in by_label[labels[kept]].results}
        return HeldOutRecord(
            run_id=run_id, pass_at_1=rates[labels[kept]], unoptimised_pass_at_1=rates[unoptimised],
            scores=scores, candidates_pass_at_1=rates, experiment_run_id=result.parent_run_id,
            comparison=comparison,
        )


def _candidates(ctx: OptimizeContext) -> dict[str, str]:
    """``{candidate: program directory}`` of every optimised program (none from a compile that
    changed no prompt, none from a refinement that left the instruction as it was)."""
    compiled, refine = ctx.finished.compile, ctx.finished.refine
    candidates = {} if compiled.changed_nothing else {"compiled": compiled.program_dir}
    if refine is not None and refine.candidate_dir:
        candidates["refined"] = refine.candidate_dir
    return candidates

