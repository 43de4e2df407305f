"""The optimisation loop behind ``critiquelab optimize SPEC.yaml``.

Steps, each its own MLflow child run under one parent run, each result saved under
``<home>/optimize/<name>-<key>/steps/`` so a re-run (after a kill, or just again) skips the
steps already finished:

0. checks: the spec's fields when it is loaded, then — before anything is written — what needs
   the pipeline and the models (:func:`experiments.optimize.spec.check_spec`) and the dataset (no
   part of the split may be empty).
1. the seeded train/val/test split (logged on the parent as params and ``split.json``).
2. ``baseline_val``: the unoptimised pipeline on the validation split.
3. ``compile``: traces (from earlier runs, or by running on the train split) → DSPy compile;
   the program is exported and logged as the ``program`` artifact (``critiquelab export RUN``).
4. ``compiled_val``: the compiled program on the validation split.
5. gate: the compiled program is kept only if its validation score does not drop (and both
   scores exist: :mod:`optimizers.gate`); the reason is printed and tagged on the parent run.
   A compile that changed no prompt (``changed_roles`` empty: no demo survived, say) is
   neither kept nor tested — two copies of one program on the test split would measure nothing.
5b. ``refine`` (optional, spec ``refine:``): TextGrad refines one role's instruction of the kept
   program (``optimizers.refine``), kept only if validation does not drop.
6. ``test``: the kept program and the unoptimised pipeline side by side on the held-out test
   split (never used above; checked), as one experiment run with ``compare``'s paired statistics.

The parent run carries the progression as step metrics (``val_pass_at_1`` at step 0 for the
baseline, 1 for the compiled program) and the kept program as its ``program`` artifact.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.datasets import load_problems
from experiments.optimize.spec import OptimizeSpec, check_spec
from experiments.paths import data_dir as default_data_dir
from experiments.paths import path_segment
from experiments.serving.provision import resolve_model, serve_model
from experiments.tracking.provenance import code_fingerprint, git_commit
from experiments.tracking.store import Tracker, flatten, tracking_uri


@dataclass
class OptimizeResult:
    parent_run_id: str
    split: dict[str, Any]
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def kept(self) -> str:
        if self.steps.get("refine", {}).get("kept"):
            return "refined"
        return str(self.steps["gate"]["kept"])

    @property
    def kept_run_id(self) -> str | None:
        """The step run whose ``program`` artifact is the kept program; None when the gates kept
        the unoptimised pipeline (there is nothing optimised to export)."""
        return {"refined": self.steps.get("refine", {}).get("run_id"),
                "compiled": self.steps["compile"]["run_id"]}.get(self.kept)

    @property
    def rejected_run_ids(self) -> dict[str, str]:
        """``{candidate: step run holding its program}`` for the candidates the gates rejected (a
        compile that changed no prompt made no candidate)."""
        rejected = {}
        if self.steps["gate"]["kept"] != "compiled" and not _changed_nothing(self.steps["compile"]):
            rejected["compiled"] = self.steps["compile"]["run_id"]
        refine = self.steps.get("refine")
        if refine is not None and not refine["kept"] and refine.get("candidate_dir"):
            rejected["refined"] = refine["run_id"]
        return rejected

    @property
    def program_dir(self) -> Path:
        if self.steps.get("refine", {}).get("kept"):
            return Path(self.steps["refine"]["program_dir"])
        return Path(self.steps["gate"]["program_dir"])


def _changed_nothing(compile_step: dict[str, Any]) -> bool:
    """Whether the compile step changed no prompt (a step finished by an older version has no
    ``changed_roles``: taken as changed)."""
    return compile_step.get("changed_roles") == []


class _Steps:
    """Finished steps on disk: a step whose file exists is not run again."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        (directory / "steps").mkdir(parents=True, exist_ok=True)

    def _path(self, name: str) -> Path:
        return self.directory / "steps" / f"{name}.json"

    def get(self, name: str) -> dict[str, Any] | None:
        path = self._path(name)
        return json.loads(path.read_text()) if path.exists() else None

    def put(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        tmp = self._path(name).with_suffix(".tmp")
        tmp.write_text(json.dumps(value, indent=2, sort_keys=True))
        tmp.replace(self._path(name))
        return value


def _key(spec: OptimizeSpec) -> str:
    blob = json.dumps({"spec": spec.model_dump(mode="json"), "code": code_fingerprint()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _mean(scores: dict[str, bool]) -> float:
    return sum(scores.values()) / len(scores) if scores else float("nan")


def run_optimization(
    spec: OptimizeSpec, *, home: Path | None = None, fresh: bool = False, cache: bool = True,
    log: Callable[[str], None] = lambda _: None, source: str = "spec", progress: bool = False,
) -> OptimizeResult:
    """Run (or resume) the optimisation ``spec`` describes; see the module docstring. ``source``
    (the spec's file) prefixes the problems found before anything runs. ``progress``: a progress
    bar per program on the held-out test (on stderr, as ``critiquelab run`` shows them)."""
    from core.errors import UserError
    from optimizers.compile import CompileConfig, changed_roles, compile_program, evaluate
    from optimizers.export import export_program, load_program
    from optimizers.gate import GateDecision
    from optimizers.gate import gate as gate_decision
    from optimizers.optimizer_params import optimizer_params
    from optimizers.splits import make_split
    from pipelines.registry import build_pipeline

    home = home or default_data_dir()
    try:
        check_spec(spec)
        problems = load_problems(
            spec.dataset.location, spec.dataset.fields, spec.dataset.limit, spec.dataset.task_ids or None,
            dataset_format=spec.dataset.format, challenge_tests=spec.dataset.challenge_tests,
            split=spec.dataset.split,
        )
        split = make_split([p.task_id for p in problems], spec.split)  # refuses a split with an empty part
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from exc
    by_id = {p.task_id: p for p in problems}
    split.check_scoring(split.test, allow_overlap=spec.split.allow_overlap)
    directory = home / "optimize" / f"{path_segment(spec.name)}-{_key(spec)}"
    if fresh and directory.exists():
        directory.rename(directory.with_name(f"{directory.name}.old-{int(time.time())}"))
    steps = _Steps(directory)
    tracker = Tracker(home, spec.name, spec.tracking.uri)
    parent = _parent_run(tracker, steps, spec, split)
    result = OptimizeResult(parent, split.as_dict())
    timeout = spec.execution.timeout_s

    with contextlib.ExitStack() as stack:
        lms: dict[str, Any] = {}
        servers: dict[str, contextlib.ExitStack] = {}

        def lm(which: str) -> Any:
            if which == "refine" and (spec.refine is None or spec.refine.model is None):
                return lm("teacher" if spec.teacher else "task")  # reuse that LM (and server)
            if which not in lms:
                model = spec.model if which == "task" or spec.teacher is None else spec.teacher
                if which == "refine" and spec.refine is not None and spec.refine.model is not None:
                    model = spec.refine.model
                servers[which] = stack.enter_context(contextlib.ExitStack())
                lms[which] = servers[which].enter_context(
                    serve_model(resolve_model(model), model, home, cache="use" if cache else "refresh")
                )
            return lms[which]

        def release(which: str) -> None:
            """Stop an LM's local server once no later step needs it (the 1.5B takes ~5 GB)."""
            if which in servers:
                servers.pop(which).close()
                lms.pop(which)

        def step(name: str, run: Callable[[str], dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
            done = steps.get(name)
            if done is not None:
                log(f"{name}: already done (run {done['run_id']})")
                result.steps[name] = done
                return done
            log(f"{name}: running")
            run_id = tracker.start_run(name, parent_id=parent)
            tracker.log_params(run_id, params)
            try:
                value = {"run_id": run_id, **run(run_id)}
            except BaseException:
                tracker.finish(run_id, "KILLED")
                raise
            tracker.log_metrics(run_id, {k: v for k, v in value.items() if isinstance(v, float)})
            tracker.finish(run_id)
            result.steps[name] = steps.put(name, value)
            return value

        def scored(ids: tuple[str, ...], program_dir: str | None) -> Callable[[str], dict[str, Any]]:
            def run(run_id: str) -> dict[str, Any]:
                program = (
                    load_program(Path(program_dir))[0] if program_dir
                    else build_pipeline(spec.pipeline.name, spec.pipeline.params)
                )
                scores = evaluate(program, [by_id[i] for i in ids], lm=lm("task"), timeout_s=timeout)
                tracker.log_text(run_id, json.dumps(scores, indent=2), "scores.json")
                return {"pass_at_1": _mean(scores), "scores": scores}
            return run

        base = step("baseline_val", scored(split.val, None), {"split": "val", "program": "baseline"})

        def compile_step(run_id: str) -> dict[str, Any]:
            traces: list[Any] = []
            if spec.optimizer.name == "traces":
                traces = _traces(spec, home, split.train, by_id, lm, timeout)
            roles = tuple(spec.optimizer.roles) if spec.optimizer.roles else None
            config = CompileConfig(spec.optimizer.name, dict(spec.optimizer.params), timeout, spec.split.seed,
                                   log_dir=directory / "optimizer_state", roles=roles)
            metrics: dict[str, float] = {}
            original = build_pipeline(spec.pipeline.name, spec.pipeline.params)
            compiled = compile_program(
                original, config,
                train=[by_id[i] for i in split.train], val=[by_id[i] for i in split.val],
                task_lm=lm("task"), teacher_lm=lm("teacher") if spec.teacher else None,
                traces=traces, progress=lambda k, v: metrics.__setitem__(k, v),
            )
            if metrics.get("failed_proposals"):
                log(f"compile: warning: {metrics['failed_proposals']:.0f} instruction proposal(s) could not "
                    "be parsed from the prompt model's reply; the current instruction stood in for them "
                    "(metric failed_proposals on this run)")
            out = directory / "program"
            export_program(compiled, out, pipeline=spec.pipeline.name,
                           params=spec.pipeline.params.model_dump(), source=run_id)
            tracker.client.log_artifacts(run_id, str(out), "program")
            demos = sum(len(p.demos) for _, p in compiled.named_predictors())
            changed = changed_roles(original, compiled)
            if not changed:
                allowed = ", ".join(roles or ["all"])
                log(f"compile: warning: no prompt changed (roles it may change: {allowed}); the compiled "
                    "program is the original, so it is not kept and not tested")
            return {"program_dir": str(out), "traces": float(len(traces)), "demos": float(demos),
                    "changed_roles": changed, **metrics}

        effective = optimizer_params(spec.optimizer.name, spec.optimizer.params).model_dump()
        compiled = step("compile", compile_step, {
            "optimizer": spec.optimizer.name, **flatten(effective, "optimizer.params."),
            "optimizer.roles": ",".join(spec.optimizer.roles or ["all"]),
        })
        if spec.refine is None or spec.refine.model is not None:
            release("teacher")  # only compile and (by default) refine use it
        cand = step("compiled_val", scored(split.val, compiled["program_dir"]),
                    {"split": "val", "program": "compiled"})
        unchanged = _changed_nothing(compiled)
        gate = steps.get("gate")
        if gate is None:
            decision = (
                GateDecision(False, "compile changed no prompt: nothing optimised to keep") if unchanged
                else gate_decision(base["pass_at_1"], cand["pass_at_1"], candidate="compiled program")
            )
            gate = {
                "kept": "compiled" if decision.keep else "baseline",
                "program_dir": compiled["program_dir"] if decision.keep else "",
                "baseline_val": base["pass_at_1"], "compiled_val": cand["pass_at_1"],
                "reason": decision.reason,
            }
            tracker.log_metrics(parent, {"val_pass_at_1": base["pass_at_1"]}, step=0)
            tracker.log_metrics(parent, {"val_pass_at_1": cand["pass_at_1"]}, step=1)
            tracker.set_tags(parent, {"critiquelab.kept": gate["kept"], "critiquelab.gate": decision.reason})
            if decision.keep:
                tracker.client.log_artifacts(parent, gate["program_dir"], "program")
            steps.put("gate", gate)
        log(f"gate: kept {gate['kept']} ({gate['reason']})")
        result.steps["gate"] = gate
        kept = gate["kept"]
        # Every optimised candidate goes to the held-out test, kept or not: the choice was made
        # on validation, and the test shows whether it held.
        candidates = {} if unchanged else {"compiled": compiled["program_dir"]}
        if spec.refine is not None:
            engine_cache = home / "textgrad_cache" if cache else None
            refined = step("refine", lambda run_id: _refine(
                spec, directory, split, by_id, gate, lm, tracker, parent, run_id, log, engine_cache,
            ), {"role": spec.refine.role, "steps": spec.refine.steps, "batch_size": spec.refine.batch_size,
                "program": gate["kept"]})
            release("refine")
            if refined["kept"]:
                kept = "refined"
            if refined.get("candidate_dir"):
                candidates["refined"] = refined["candidate_dir"]
        release("teacher")
        release("task")  # the test experiment serves its own
        split.check_scoring(split.test, allow_overlap=spec.split.allow_overlap)
        test = step("test", lambda run_id: _paired_test(
            spec, split.test, candidates, kept, home, cache, tracker, run_id, log, progress,
        ), {"split": "test", "program": kept})
        tracker.log_metrics(parent, {
            "test_pass_at_1": test["pass_at_1"],
            "test_pass_at_1_unoptimised": test["unoptimised_pass_at_1"],
        })
        tracker.log_text(parent, test["comparison"], "test_comparison.md")
    tracker.finish(parent)
    return result


def _refine(
    spec: OptimizeSpec, directory: Path, split: Any, by_id: dict[str, Any], gate: dict[str, Any],
    lm: Callable[[str], Any], tracker: Tracker, parent: str, run_id: str,
    log: Callable[[str], None], engine_cache: Path | None,
) -> dict[str, Any]:
    """The ``refine`` step: TextGrad on the gate's program; logs the gate and both instructions."""
    from optimizers.export import export_program, load_program
    from optimizers.refine import refine_instruction
    from optimizers.textgrad_engine import engine_from_lm
    from pipelines.registry import build_pipeline

    assert spec.refine is not None
    program = (load_program(Path(gate["program_dir"]))[0] if gate["program_dir"]
               else build_pipeline(spec.pipeline.name, spec.pipeline.params))
    engine = engine_from_lm(lm("refine"), cache_dir=engine_cache)
    refined = refine_instruction(
        program, spec.refine.role, [by_id[i] for i in split.train], [by_id[i] for i in split.val],
        task_lm=lm("task"), engine=engine, steps=spec.refine.steps, batch_size=spec.refine.batch_size,
        seed=spec.split.seed, timeout_s=spec.execution.timeout_s,
        val_before=gate["compiled_val"] if gate["kept"] == "compiled" else gate["baseline_val"],
        progress=log,
    )
    tracker.log_text(run_id, refined.instruction_before, "instruction_before.txt")
    tracker.log_text(run_id, refined.instruction_after, "instruction_after.txt")
    tracker.log_text(run_id, json.dumps(refined.history, indent=2), "history.json")
    tracker.log_metrics(run_id, {"kept": float(refined.kept)})
    tracker.set_tags(run_id, {"critiquelab.gate": refined.reason})
    log(f"refine gate: {'kept' if refined.kept else 'not kept'} ({refined.reason})")
    tracker.log_metrics(parent, {"val_pass_at_1": refined.val_after}, step=2)
    candidate = ""
    if refined.instruction_after != refined.instruction_before:  # a candidate exists, kept or not
        candidate = str(directory / "program-refined")
        export_program(refined.candidate, Path(candidate), pipeline=spec.pipeline.name,
                       params=spec.pipeline.params.model_dump(), source=run_id)
        tracker.client.log_artifacts(run_id, candidate, "program")
    if refined.kept:
        tracker.client.log_artifacts(parent, candidate, "program")
        tracker.set_tags(parent, {"critiquelab.kept": "refined"})
    return {"kept": refined.kept, "program_dir": candidate if refined.kept else "",
            "candidate_dir": candidate, "val_before": refined.val_before, "val_after": refined.val_after,
            "instruction_after": refined.instruction_after, "reason": refined.reason}


def _paired_test(
    spec: OptimizeSpec, test_ids: tuple[str, ...], candidates: dict[str, str], kept: str, home: Path,
    cache: bool, tracker: Tracker, run_id: str, log: Callable[[str], None], progress: bool,
) -> dict[str, Any]:
    """The held-out verdict: the unoptimised pipeline and every optimised candidate side by side
    in one experiment run (same problems, model and seed), then ``compare``'s paired statistics —
    the same table researchers read for any two pipelines. ``kept`` names the candidate the
    validation gate chose (or ``baseline``); its score is the optimisation's test score."""
    from experiments.runner import run_experiment
    from experiments.spec import ExperimentSpec, PipelineSpec

    name, params = spec.pipeline.name, spec.pipeline.params
    unoptimised = spec.pipeline.display_name
    labels = {"baseline": unoptimised, **{c: f"{unoptimised}+{c}" for c in candidates}}
    pipelines = [PipelineSpec(name=name, label=unoptimised, params=params)] + [
        PipelineSpec(name=name, label=labels[c], params=params, prompts=d) for c, d in candidates.items()
    ]
    experiment = ExperimentSpec(
        name=f"{spec.name}-test", description=f"held-out test split of optimisation {spec.name}",
        dataset=spec.dataset.model_copy(update={"task_ids": list(test_ids)}), model=spec.model,
        pipelines=pipelines, execution=spec.execution, tracking=spec.tracking,
    )
    log(f"test: {' vs '.join(p.display_name for p in pipelines)} on {len(test_ids)} held-out problems")
    result = run_experiment(experiment, home=home, cache=cache, progress=progress)
    by_label = {child.pipeline: child for child in result.children}
    rates = {label: child.metrics["pass_at_1"] for label, child in by_label.items()}
    comparison = result.comparison.markdown if result.comparison is not None else (
        f"Nothing to compare: pass@1 {rates[unoptimised]:.4f}.\n"
    )
    tracker.log_text(run_id, comparison, "comparison.md")
    tracker.set_tags(run_id, {"critiquelab.test_run": result.parent_run_id})
    scores = {r.task_id: r.passed for r in by_label[labels[kept]].results}
    return {
        "pass_at_1": rates[labels[kept]], "unoptimised_pass_at_1": rates[unoptimised], "scores": scores,
        "candidates_pass_at_1": rates, "experiment_run_id": result.parent_run_id, "comparison": comparison,
    }


def _traces(
    spec: OptimizeSpec, home: Path, train: tuple[str, ...], by_id: dict[str, Any],
    lm: Callable[[str], Any], timeout: float,
) -> list[Any]:
    """Pool traces of the train split: from the runs the spec names, else from running the
    (teacher-free) pipeline on the train split now."""
    from optimizers.compile import evaluate
    from optimizers.training_examples import collect_from_home
    from pipelines.registry import build_pipeline

    if spec.traces.run_ids or spec.traces.experiment:
        return collect_from_home(
            home, uri=tracking_uri(home, spec.tracking.uri), run_ids=spec.traces.run_ids,
            experiment=spec.traces.experiment,
            pipeline=spec.pipeline.name if spec.traces.experiment else None, task_ids=train,
        )
    traces: list[Any] = []
    program = build_pipeline(spec.pipeline.name, spec.pipeline.params)
    evaluate(program, [by_id[i] for i in train], lm=lm("task"), timeout_s=timeout, traces=traces)
    return traces


def _parent_run(tracker: Tracker, steps: _Steps, spec: OptimizeSpec, split: Any) -> str:
    """The parent run of this configuration: reopened on a re-run, created the first time."""
    parent = (steps.get("parent") or {}).get("run_id")
    if parent:
        with contextlib.suppress(Exception):  # deleted, or from another store: start afresh
            tracker.reopen(parent)
            return str(parent)
    parent = tracker.start_run(spec.name, tags={"critiquelab.kind": "optimize"})
    steps.put("parent", {"run_id": parent})
    sizes = f"{len(split.train)}/{len(split.val)}/{len(split.test)}"
    tracker.log_params(parent, {
        **flatten(spec.model_dump(mode="json"), "config."),
        "split.fingerprint": split.fingerprint, "split.sizes": sizes,
    })
    tracker.set_tags(parent, {"git_commit": git_commit()})
    tracker.log_text(parent, json.dumps(split.as_dict(), indent=2), "split.json")
    return parent
