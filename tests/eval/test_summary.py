"""critiquelab.eval.summary: the metrics every pipeline has, and the pipeline's own metrics exactly as the
caller's figure summary gives them — summarize guesses nothing from the keys a result holds (the
figure summaries themselves: tests/pipelines/test_outcome_summaries.py)."""

import pytest

from critiquelab.eval.results import ProblemResult
from critiquelab.eval.summary import summarize
from critiquelab.eval.verdict import Status


def _results(passed, **extra):
    return [
        ProblemResult(task_id=f"T/{i}", pipeline="p", seed=0, status=Status.PASSED if p else Status.FAILED,
                      prompt_tokens=10, completion_tokens=5, lm_calls=1,
                      extra={k: v[i] for k, v in extra.items()})
        for i, p in enumerate(passed)
    ]


def test_common_metrics_and_no_pipeline_metrics_without_a_figure_summary():
    results = _results([True, False, True], first_passed=[True, False, False], consensus=[True] * 3)
    metrics = summarize(results)
    assert metrics["pass_at_1"] == pytest.approx(2 / 3)
    assert (metrics["problems"], metrics["problems_passed"], metrics["total_tokens"]) == (3, 2, 45)
    assert (metrics["status.passed"], metrics["status.failed"]) == (2, 1)
    # Figures in extra are the pipeline's outcome model's to summarise, not eval's to guess at.
    assert not [k for k in metrics if k.startswith(("first_pass", "consensus", "critique", "samples_"))]


def test_the_figure_summary_is_merged_as_given():
    results = _results([True, False])
    seen = []

    def figures(given):
        seen.append(list(given))
        return {"consensus_rate": 0.5}

    metrics = summarize(results, figures)
    assert metrics["consensus_rate"] == 0.5 and seen == [results]
