"""One result schema: the per-problem table (problems.parquet) reads back into the runner's own
ProblemResult, figures and all — the viewer and compare read nothing else."""

import json

import pandas as pd

from critiquelab.eval.result_schema import upgrade_table
from critiquelab.eval.results import ProblemResult, ResolvedParams, results_from_table, results_table
from critiquelab.eval.verdict import Status


def _result(task_id, status, **extra):
    return ProblemResult(task_id=task_id, pipeline="debate", seed=3, status=status, reason="assertion",
                         detail="expected 2", iterations=2, prompt_tokens=10, completion_tokens=5, lm_calls=3,
                         cached_lm_calls=1, latency_s=1.5, final_code="def f(): pass", parsed=False,
                         usage_by_role={"judge": {"prompt_tokens": 7.0, "completion_tokens": 2.0}},
                         extra=extra)


def test_the_table_reads_back_into_the_results_it_was_made_of(tmp_path):
    results = [
        _result("T/0", Status.PASSED, consensus=True, agreement=[0.5, 1.0],
                debaters_final_passed=[True, False], judge_decision="chosen", generated_tests_correct=2),
        _result("T/1", Status.TIMED_OUT, consensus=False, agreement=[0.5],
                debaters_final_passed=[False, False], judge_decision="fallback"),  # no accuracy recorded
    ]
    path = tmp_path / "problems.parquet"
    results_table(results).to_parquet(path)  # as the runner logs it: numpy cells and NaN come back
    assert results_from_table(pd.read_parquet(path)) == results


def test_an_older_table_without_some_columns_reads_with_their_defaults():
    frame = pd.DataFrame([{"task_id": "T/0", "pipeline": "baseline", "seed": 0, "status": "failed",
                           "passed": False, "extra.first_passed": float("nan")}])
    [result] = results_from_table(frame)
    assert (result.status, result.reason, result.iterations, result.final_code) == (Status.FAILED, "", 1, "")
    assert result.usage_by_role == {}  # a table written before usage by role was kept
    assert result.extra == {}  # an empty cell is a figure not recorded, not a value


def test_resolved_params_keep_the_checkpoint_shape():
    """A checkpoint line holds only what was resolved ({} or {"token_budget": …}), as written
    before resolved params were a model, and such a line reads back to an equal result."""
    plain = _result("T/0", Status.PASSED)
    budgeted = plain.model_copy(update={"resolved_params": ResolvedParams(token_budget=1234.5)})
    assert json.loads(plain.model_dump_json())["resolved_params"] == {}
    assert json.loads(budgeted.model_dump_json())["resolved_params"] == {"token_budget": 1234.5}
    for result in (plain, budgeted):
        assert ProblemResult.model_validate_json(result.model_dump_json()) == result
    written_before = {**json.loads(plain.model_dump_json()), "resolved_params": {"token_budget": 1234}}
    assert ProblemResult.model_validate(written_before).resolved_params == ResolvedParams(token_budget=1234.0)


def test_isolation_written_among_the_figures_by_older_code_reads_into_its_field():
    """The sandbox level was once the figure extra.isolation: checkpoints, traces and tables
    written then load with it in its own field, and it is no figure any more."""
    written = _result("T/0", Status.PASSED).model_dump_json(exclude={"isolation", "schema_version"})
    line = {**json.loads(written), "extra": {"isolation": "bwrap", "consensus": True}}
    old = ProblemResult.model_validate_json(json.dumps(line))
    assert (old.isolation, old.extra) == ("bwrap", {"consensus": True})
    # an older table: unversioned, the level among the figures
    table = results_table([old]).rename(columns={"isolation": "extra.isolation"})
    table = table.drop(columns=["schema_version"])
    assert results_from_table(table) == [old]
    assert "isolation" in upgrade_table(table) and "extra.isolation" not in upgrade_table(table)
    assert ProblemResult.model_validate_json(old.model_dump_json()) == old
