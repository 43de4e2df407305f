"""``ExperimentResult.problems``: the per-problem rows of every pipeline × seed, from the API."""

from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder
from support.specs import fake_spec

from critiquelab.eval.results import TABLE_COLUMNS
from critiquelab.experiments.api import run
from critiquelab.experiments.runner import ExperimentResult


def test_the_result_holds_one_documented_row_per_problem_pipeline_and_seed(home, humaneval_problems):
    pipelines = [{"name": "baseline"},
                 {"name": "critic_loop", "label": "critic", "params": {"max_iterations": 1}}]
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        result = run(fake_spec(fake.api_base, limit=2, pipelines=pipelines, seeds=[0, 1]), progress=False,
                     compare=False)
    frame = result.problems
    assert len(frame) == 2 * 2 * 2
    assert list(frame.columns[:4]) == ["pipeline", "seed", "run_id", "task_id"]
    assert set(TABLE_COLUMNS) | {"usage_by_role"} <= set(frame.columns)
    assert "extra.stop_reason" in frame.columns  # the critic loop's figures, empty for the baseline's rows
    assert sorted(set(zip(frame["pipeline"], frame["seed"], strict=True))) == [
        ("baseline", 0), ("baseline", 1), ("critic", 0), ("critic", 1)]
    by_child = {c.run_id: c for c in result.children}
    for run_id, rows in frame.groupby("run_id"):
        child = by_child[run_id]
        assert list(rows["task_id"]) == [r.task_id for r in child.results]
        assert rows["passed"].sum() == child.metrics["problems_passed"]
    for field in TABLE_COLUMNS:  # every documented column is named in the property's docstring
        assert f"``{field}``" in (ExperimentResult.problems.__doc__ or ""), field
    assert list(ExperimentResult("e", "p").problems.columns[:4]) == ["pipeline", "seed", "run_id", "task_id"]
