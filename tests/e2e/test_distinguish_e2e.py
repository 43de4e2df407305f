"""distinguish on the real bundled model, one HumanEval problem: the greedy answer is the
baseline's own request (an LM-cache hit after the baseline), it is checked against samples, and
every per-problem figure and candidate score is there."""

import pytest

from critiquelab.experiments.api import run

pytestmark = pytest.mark.e2e


def test_distinguish_on_bundled_model(home):
    spec = {
        "name": "e2e-distinguish",
        "dataset": {"source": "humaneval", "task_ids": ["HumanEval/0"]},
        "model": {"id": "local", "max_tokens": 512},
        "pipelines": [
            {"name": "baseline"},
            {"name": "distinguish", "params": {"check_samples": 2, "k": 3, "n_inputs": 5}},
        ],
    }
    baseline, distinguish = run(spec, progress=False).children
    (greedy,), (result,) = baseline.results, distinguish.results
    extra, calls = result.extra, {role: u["calls"] for role, u in result.usage_by_role.items()}
    drawn = 2 if extra["greedy_passed_visible"] else 3
    assert extra["samples"] == drawn and len(extra["candidates_passed"]) == 1 + drawn
    assert extra["candidates_passed"][0] == greedy.passed  # candidate 0 is the baseline's answer
    assert calls["coder"] == 1 + drawn and result.cached_lm_calls >= 1  # that answer: from the LM cache
    # The writer is asked only when the pool holds two programs or more; the judge once per meeting.
    assert (calls.get("input_writer", 0) > 0) == (extra["selection"] != "one_program")
    assert calls.get("pairwise_judge", 0) == extra["judge_calls"]
    assert extra["inputs_kept"] + extra["inputs_dropped"] <= extra["inputs_written"]
    assert extra["judge_calls"] == 0 or extra["selection"] == "pairwise"
    assert extra["greedy_replaced"] == (extra["greedy_passed_visible"] and extra["chosen"] != 0)
    if extra["chosen"] == 0:
        assert result.final_code == greedy.final_code
    for key in ("greedy_replaced", "greedy_replaced_right", "greedy_replaced_wrong", "judge_calls"):
        assert key in distinguish.metrics, key
    assert ("selection_accuracy" in distinguish.metrics) == any(extra["candidates_passed"])
