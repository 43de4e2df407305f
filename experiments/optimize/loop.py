"""The optimisation loop behind ``critiquelab optimize SPEC.yaml``.

Steps, each its own MLflow child run under one parent run, each result saved under
``<home>/optimize/<name>-<key>/steps/`` so a re-run (after a kill, or just again) skips the
steps already finished:

0. checks: the spec's fields when it is loaded, then — before anything is written — what needs
   the pipeline and the models (:func:`critiquelab.experiments.optimize.spec.check_spec`) and the dataset (no
   part of the split may be empty).
1. the seeded train/val/test split (logged on the parent as params and ``split.json``); with
   ``split.test: test_half`` the test part is the dataset's held-out test half and train/val
   come from ``dataset.split`` (:mod:`critiquelab.optimizers.splits`).
2. ``baseline_val``: the unoptimised pipeline on the validation split.
3. ``compile``: traces (from earlier runs, or by running on the train split) → DSPy compile;
   the program is exported and logged as the ``program`` artifact (``critiquelab export RUN``).
4. ``compiled_val``: the compiled program on the validation split.
5. gate: the compiled program is kept only if its validation score does not drop (and both
   scores exist: :mod:`critiquelab.optimizers.gate`); the reason is printed and tagged on the parent run.
   A compile that changed no prompt (``changed_roles`` empty: no demo survived, say) is
   neither kept nor tested — two copies of one program on the test split would measure nothing.
5b. ``refine`` (optional, spec ``refine:``): TextGrad refines one role's instruction of the kept
   program (``critiquelab.optimizers.refine``), kept only if validation does not drop.
6. ``test``: the kept program and the unoptimised pipeline side by side on the held-out test
   split (never used above; checked), as one experiment run with ``compare``'s paired statistics.

The parent run carries the progression as step metrics (``val_pass_at_1`` at step 0 for the
baseline, 1 for the compiled program) and the kept program as its ``program`` artifact.

Steps 2–6 are typed steps (:mod:`critiquelab.experiments.optimize.plan`) over one shared context
(:class:`~critiquelab.experiments.optimize.context.OptimizeContext`), each saving a typed record
(:mod:`critiquelab.experiments.optimize.records`); this loop runs them in order and stops each LM's server
after the last step that asks for that LM.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import load_problems
from critiquelab.eval.held_out import SplitName
from critiquelab.eval.problems import Problem
from critiquelab.experiments.controls import refuse_control_trace_sources
from critiquelab.experiments.optimize.context import Finished, OptimizeContext
from critiquelab.experiments.optimize.plan import plan
from critiquelab.experiments.optimize.records import RunRecord, StepStore
from critiquelab.experiments.optimize.served_models import ModelRole, ServedModels
from critiquelab.experiments.optimize.spec import OptimizeSpec, check_spec
from critiquelab.experiments.optimize.step_kinds import Step
from critiquelab.experiments.paths import data_dir as default_data_dir
from critiquelab.experiments.paths import path_segment
from critiquelab.experiments.tracking.local_store import check_writable_store
from critiquelab.experiments.tracking.provenance import code_fingerprint, git_commit
from critiquelab.experiments.tracking.store import Tracker, check_tracking_server, flatten, tracking_uri
from critiquelab.optimizers.splits import Split, SplitOverlapError, make_split
from critiquelab.runtime.pool.store_lock import HeldStores


@dataclass(frozen=True)
class OptimizeResult:
    """An optimisation's outcome: its parent run, the split and every step's record."""

    parent_run_id: str
    split: dict[str, Any]  # Split.as_dict(): the seed and the task ids of each part
    finished: Finished

    @property
    def steps(self) -> dict[str, dict[str, Any]]:
        """Each step's record as its file holds it, by step name (``gate``, ``test`` …)."""
        return self.finished.saved()

    @property
    def kept(self) -> str:
        return self.finished.kept

    @property
    def kept_run_id(self) -> str | None:
        """The step run whose ``program`` artifact is the kept program; None when the gates kept
        the unoptimised pipeline (there is nothing optimised to export)."""
        refine = self.finished.refine
        if self.kept == "refined" and refine is not None:
            return refine.run_id
        return self.finished.compile.run_id if self.kept == "compiled" else None

    @property
    def rejected_run_ids(self) -> dict[str, str]:
        """``{candidate: step run holding its program}`` for the candidates the gates rejected (a
        compile that changed no prompt made no candidate)."""
        compiled, refine = self.finished.compile, self.finished.refine
        rejected = {}
        if self.finished.gate.kept != "compiled" and not compiled.changed_nothing:
            rejected["compiled"] = compiled.run_id
        if refine is not None and not refine.kept and refine.candidate_dir:
            rejected["refined"] = refine.run_id
        return rejected

    @property
    def program_dir(self) -> Path:
        """The kept program's directory ('.' when the unoptimised pipeline was kept)."""
        refine = self.finished.refine
        if refine is not None and refine.kept:
            return Path(refine.program_dir)
        return Path(self.finished.gate.program_dir)


def _key(spec: OptimizeSpec) -> str:
    blob = json.dumps({"spec": spec.model_dump(mode="json"), "code": code_fingerprint()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_optimization(
    spec: OptimizeSpec, *, home: Path | None = None, fresh: bool = False, cache: bool = True,
    log: Callable[[str], None] = lambda _: None, source: str = "spec", progress: bool = False,
) -> OptimizeResult:
    """Run (or resume) the optimisation ``spec`` describes; see the module docstring. ``source``
    (the spec's file) prefixes the problems found before anything runs. ``progress``: a progress
    bar per program on the held-out test (on stderr, as ``critiquelab run`` shows them)."""
    home = home or default_data_dir()
    directory = home / "optimize" / f"{path_segment(spec.name)}-{_key(spec)}"
    store = StepStore(directory)
    steps = plan(spec)
    pending = steps if fresh else [step for step in steps if not store.has(step.name)]
    # The held-out test is an experiment run with its pool in the data directory's Chroma store
    # (and a compile may read traces from it): like `run`, the optimisation holds that store's
    # lock from before its first file to its end, so another process on it is refused now.
    with HeldStores([home / "chroma"] if pending else []) as stores:
        stores.take(create=False)
        problems, split, dataset_notices = _checked_problems(spec, source)
        uri = tracking_uri(home, spec.tracking.uri)
        check_writable_store(uri)  # a local store file MLflow cannot use
        try:  # a positive control's traces carry hidden-test text (critiquelab.experiments.controls)
            refuse_control_trace_sources(spec.traces.run_ids, home, spec.tracking.uri, spec.traces.experiment)
        except UserError as exc:
            raise UserError(f"{source}: {exc}") from exc
        with ServedModels(spec, home, cache=cache) as models:
            # What can refuse the start (the endpoints, the tracking, the store's lock) comes
            # before the first file: the tracking server is probed before the lock file is made.
            _check_models(models, spec, pending)
            check_tracking_server(uri, spec.name)
            stores.take()
            for notice in dataset_notices:  # the start stands: a refusal above was the only line
                logging.getLogger(__name__).warning("%s", notice)
            tracker = Tracker(home, spec.name, spec.tracking.uri)
            if fresh and directory.exists():
                directory.rename(directory.with_name(f"{directory.name}.old-{time.time_ns()}"))
            directory.mkdir(parents=True, exist_ok=True)
            parent = _parent_run(tracker, store, spec, split)
            ctx = OptimizeContext(
                spec=spec, home=home, directory=directory, store=store, split=split,
                problems={p.task_id: p for p in problems}, tracker=tracker, parent_run_id=parent,
                models=models, log=log, cache=cache, progress=progress,
            )
            try:
                for step, unneeded in zip(steps, release_schedule(steps, spec, models), strict=True):
                    ctx.finished.add(step.name, step.resume(ctx))
                    for served in unneeded:
                        models.release(served)
            except BaseException:
                tracker.kill_open_runs()  # the parent (a step marks its own run), resumed by the same command
                raise
        tracker.finish(parent)
    return OptimizeResult(parent, split.as_dict(), ctx.finished)


def _checked_problems(spec: OptimizeSpec, source: str) -> tuple[list[Problem], Split, list[str]]:
    """The spec checked against the pipeline, the models and the dataset (no part of the split may
    be empty, the test part may not overlap train/validation unless allowed), before anything is
    written; the dataset's problems (both halves with ``split.test: test_half``), their split, and
    the notice of a detected dataset format, kept for when the start stands."""
    notices: list[str] = []
    try:
        check_spec(spec)
        problems = _load(spec, spec.dataset.split, notices.append)
        held_out = _load(spec, "test", lambda _: None) if spec.split.test == "test_half" else None
        split = make_split([p.task_id for p in problems], spec.split,  # refuses a split with an empty part
                           test_ids=[p.task_id for p in held_out] if held_out is not None else None)
        split.check_scoring(split.test, allow_overlap=spec.split.allow_overlap)
    except UserError as exc:
        hint = ""
        if isinstance(exc, SplitOverlapError) and spec.split.test == "test_half":
            hint = (f" (train and val come from dataset.split: {spec.dataset.split}; "
                    "dataset.split: dev keeps them out of the test half)")
        raise UserError(f"{source}: {exc}{hint}") from exc
    return list({p.task_id: p for p in [*problems, *(held_out or [])]}.values()), split, notices


def _load(spec: OptimizeSpec, half: SplitName, on_notice: Callable[[str], None]) -> list[Problem]:
    """The spec's dataset problems of the held-out protocol's ``half`` (``task_ids`` and ``limit``
    applied within it); a detected format's notice goes to ``on_notice``."""
    dataset = spec.dataset
    return load_problems(
        dataset.location, dataset.fields, dataset.limit, dataset.task_ids,
        dataset_format=dataset.format, challenge_tests=dataset.challenge_tests, split=half,
        on_notice=on_notice,
    )


def _check_models(models: ServedModels, spec: OptimizeSpec, pending: Sequence[Step[Any]]) -> None:
    """Every LM the steps still to run may ask (probed when remote), the first such step's served
    now (:meth:`ServedModels.check`); the held-out test runs an experiment that serves the task
    model itself, so it counts too."""
    if not pending:
        return
    first = next((step for step in pending if step.models(spec)), None)
    task: ModelRole = "task"
    models.check({role for step in pending for role in step.models(spec)} | {task},
                 start=first.models(spec) if first is not None else ())


def release_schedule(
    steps: Sequence[Step[Any]], spec: OptimizeSpec, models: ServedModels
) -> list[list[ModelRole]]:
    """After each step, the LMs (as served: :meth:`ServedModels.served_as`) no later step asks
    for: stopped then, to free their memory."""
    last_use: dict[ModelRole, int] = {}
    for index, step in enumerate(steps):
        for role in step.models(spec):
            last_use[models.served_as(role)] = index
    return [sorted(served for served, last in last_use.items() if last == index)
            for index in range(len(steps))]


def _parent_run(tracker: Tracker, store: StepStore, spec: OptimizeSpec, split: Split) -> str:
    """The parent run of this configuration: reopened on a re-run, created the first time."""
    earlier = store.load("parent", RunRecord)
    if earlier is not None and earlier.run_id:
        with contextlib.suppress(Exception):  # deleted, or from another store: start afresh
            tracker.reopen(earlier.run_id)
            return earlier.run_id
    parent = tracker.start_run(spec.name, tags={"critiquelab.kind": "optimize"})
    store.save("parent", RunRecord(run_id=parent))
    sizes = f"{len(split.train)}/{len(split.val)}/{len(split.test)}"
    tracker.log_params(parent, {
        **flatten(spec.model_dump(mode="json"), "config."),
        "split.fingerprint": split.fingerprint, "split.sizes": sizes,
    })
    tracker.set_tags(parent, {"git_commit": git_commit()})
    tracker.log_text(parent, json.dumps(split.as_dict(), indent=2), "split.json")
    return parent
