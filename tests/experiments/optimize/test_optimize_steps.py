"""The typed steps of `critiquelab optimize`: each step's record reads back exactly as it was
saved (a record of an older version too), and each LM's server is stopped after the last step
that asks for it — no sooner, since a re-served model costs a server start."""

import json
import math

import pytest

from critiquelab.experiments.optimize.loop import release_schedule
from critiquelab.experiments.optimize.plan import plan
from critiquelab.experiments.optimize.records import CompileRecord, ScoredRecord, StepStore
from critiquelab.experiments.optimize.served_models import ServedModels
from critiquelab.experiments.optimize.spec import OptimizeSpec

FAKE = {"id": "openai/fake", "api_base": "http://127.0.0.1:9/v1"}


def _spec(**changes):
    return OptimizeSpec.model_validate({
        "name": "steps", "pipeline": {"name": "critic_loop"}, "model": FAKE, **changes,
    })


def test_an_older_compile_record_resumes_and_is_saved_back_unchanged(tmp_path):
    store = StepStore(tmp_path)
    # Written before compile recorded changed_roles, with one of the compiler's own figures.
    older = {"demos": 2.0, "demos_dropped.coder": 1.0, "program_dir": "/p", "run_id": "r1", "traces": 0.0}
    assert not (tmp_path / "steps").exists()  # made with the first record, not by opening the store
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "compile.json").write_text(json.dumps(older, indent=2, sort_keys=True))
    record = store.load("compile", CompileRecord)
    assert record is not None and record.saved() == older
    assert not record.changed_nothing  # unknown: taken as changed, so kept and tested as before
    assert record.metrics() == {"demos": 2.0, "demos_dropped.coder": 1.0, "traces": 0.0}
    store.save("again", record)
    steps = tmp_path / "steps"
    assert (steps / "again.json").read_text() == (steps / "compile.json").read_text()


def test_a_score_of_no_problem_stays_nan_and_a_missing_step_reads_as_unfinished(tmp_path):
    store = StepStore(tmp_path)
    store.save("baseline_val", ScoredRecord(run_id="r", pass_at_1=float("nan"), scores={}))
    assert '"pass_at_1": NaN' in (tmp_path / "steps" / "baseline_val.json").read_text()
    back = store.load("baseline_val", ScoredRecord)
    assert back is not None and math.isnan(back.pass_at_1) and back.metrics().keys() == {"pass_at_1"}
    assert store.load("compiled_val", ScoredRecord) is None


def test_a_compile_that_changed_no_prompt_is_known_by_its_record():
    record = CompileRecord(run_id="r", program_dir="/p", traces=0.0, demos=0.0, changed_roles=[])
    assert record.changed_nothing
    assert not CompileRecord(run_id="r", program_dir="/p", traces=0.0, demos=1.0,
                             changed_roles=["fixer"]).changed_nothing


# After which step each LM is stopped, by step name: (spec changes, {step: LMs stopped after it}).
SCHEDULES = {
    "task model only": ({}, {"compiled_val": ["task"]}),
    "teacher stops after compile": (
        {"teacher": {**FAKE, "id": "openai/teacher"}}, {"compile": ["teacher"], "compiled_val": ["task"]},
    ),
    "refine reuses the teacher": (
        {"teacher": {**FAKE, "id": "openai/teacher"}, "refine": {"role": "coder"}},
        {"refine": ["task", "teacher"]},
    ),
    "refine reuses the task model": ({"refine": {"role": "coder"}}, {"refine": ["task"]}),
    "refine with its own model": (
        {"teacher": {**FAKE, "id": "openai/teacher"}, "refine": {"role": "coder", "model": FAKE}},
        {"compile": ["teacher"], "refine": ["refine", "task"]},
    ),
}


@pytest.mark.parametrize("changes, stopped", SCHEDULES.values(), ids=SCHEDULES.keys())
def test_each_lm_is_stopped_after_the_last_step_that_asks_for_it(tmp_path, changes, stopped):
    spec = _spec(**changes)
    steps = plan(spec)
    schedule = release_schedule(steps, spec, ServedModels(spec, tmp_path, cache=False))
    found = {step.name: released for step, released in zip(steps, schedule, strict=True) if released}
    assert found == stopped  # none after the gate or the test: the test experiment serves its own
