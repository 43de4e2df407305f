"""eval.summary: metrics whose denominator is empty are absent (never logged as 0), and the
run-level metrics agree with compare's pooled ones (eval.statistics) on the same rows."""

import pytest

from eval.metrics import pass_at_k
from eval.results import ProblemResult, results_table
from eval.statistics import pipeline_summary, sample_coverage_notices
from eval.summary import consensus_metrics, revision_metrics, sample_metrics, search_metrics, summarize
from eval.verdict import Status

CRITIQUE_RATES = ("critique_success_rate", "harmful_revision_rate")
DEBATE_KEYS = ("consensus_rate", "consensus_correctness", "final_in_majority_rate", "mean_final_agreement",
               "flips_correct_to_wrong", "flips_wrong_to_correct")


def _results(passed, **extra):
    return [
        ProblemResult(task_id=f"T/{i}", pipeline="p", seed=0, status=Status.PASSED if p else Status.FAILED,
                      prompt_tokens=10, completion_tokens=5, lm_calls=1,
                      extra={k: v[i] for k, v in extra.items()})
        for i, p in enumerate(passed)
    ]


def test_baseline_has_no_critique_debate_or_sample_metrics():
    metrics = summarize(_results([True, False, True]))
    assert metrics["pass_at_1"] == pytest.approx(2 / 3)
    assert not [k for k in metrics if k in CRITIQUE_RATES + DEBATE_KEYS or k.startswith("samples_")]
    assert "first_pass_at_1" not in metrics


def test_critique_rates_are_absent_when_nothing_qualifies():
    # Every first draft failed and the critic never asked for changes: neither rate is measurable.
    silent = revision_metrics(_results([False, True], first_passed=[False, False],
                                       changes_requested=[False, False]))
    assert silent["first_pass_at_1"] == 0.0
    assert not set(CRITIQUE_RATES) & set(silent)
    assert (silent["harmful_revisions"], silent["critique_rescues"]) == (0, 0)  # real counts
    # First drafts all passed: harmful revisions are measurable, critique success is not.
    perfect = revision_metrics(_results([True, True], first_passed=[True, True],
                                        changes_requested=[True, False]))
    assert perfect["harmful_revision_rate"] == 0.0 and "critique_success_rate" not in perfect
    # Challenged failures exist, no first draft passed: only critique success.
    rescued = revision_metrics(_results([True, False], first_passed=[False, False],
                                        changes_requested=[True, True]))
    assert rescued["critique_success_rate"] == 0.5 and "harmful_revision_rate" not in rescued


def test_debate_without_consensus_or_debater_outcomes():
    metrics = consensus_metrics(_results([True, False], consensus=[False, False],
                                         final_in_majority=[False, False]))
    assert (metrics["consensus_rate"], metrics["consensus_correctness"]) == (0.0, 0.0)
    for absent in ("final_in_majority_rate", "mean_final_agreement", "flips_correct_to_wrong",
                   "flips_wrong_to_correct"):
        assert absent not in metrics, absent


def test_final_in_majority_rate_is_over_consensus_debates_like_compare():
    passed = [True, True, False, False]
    extra = dict(consensus=[True, True, True, False], final_in_majority=[True, False, True, False],
                 agreement=[[1 / 3, 1.0], [1 / 3, 2 / 3], [2 / 3, 2 / 3], [1 / 3, 1 / 3]],
                 debaters_first_passed=[[True, False, False]] * 4,
                 debaters_final_passed=[[False, True, True]] * 4)
    results = _results(passed, **extra)
    logged = consensus_metrics(results)
    assert logged["final_in_majority_rate"] == pytest.approx(2 / 3)
    assert logged["mean_final_agreement"] == pytest.approx((1 + 2 / 3 + 2 / 3 + 1 / 3) / 4)
    assert (logged["flips_correct_to_wrong"], logged["flips_wrong_to_correct"]) == (4, 8)
    pooled = pipeline_summary(results_table(results)).iloc[0]
    for logged_key, pooled_key in (("final_in_majority_rate", "final_in_majority_rate"),
                                   ("consensus_rate", "consensus_rate"),
                                   ("consensus_correctness", "consensus_correctness"),
                                   ("mean_final_agreement", "agreement_final")):
        assert logged[logged_key] == pytest.approx(pooled[pooled_key]), logged_key


def test_sample_metrics_only_for_k_that_some_problem_reached():
    metrics = sample_metrics(_results([True, False], samples_passed=[[True, False, False], [False] * 3]))
    assert metrics["samples_pass_at_1"] == pytest.approx(1 / 6)
    assert "samples_pass_at_5" not in metrics and "samples_pass_at_10" not in metrics
    assert sample_metrics(_results([True])) == {}


def test_pipeline_summary_vote_agreement_skips_problems_without_samples():
    frame = results_table(_results([True, False, True], samples=[3, 0, 4], largest_group=[3, 0, 2]))
    row = pipeline_summary(frame).iloc[0]
    assert row["vote_agreement"] == pytest.approx((1 + 0.5) / 2)
    alone = pipeline_summary(results_table(_results([False], samples=[0], largest_group=[0])))
    assert "vote_agreement" not in alone


def test_samples_pass_at_k_up_to_20_in_the_run_metrics_and_compare_table():
    twenty = [True] * 3 + [False] * 17
    metrics = sample_metrics(_results([True, False], samples_passed=[twenty, [False] * 5]))
    expected = {k: (pass_at_k(20, 3, k) + (pass_at_k(5, 0, k) if k <= 5 else 0)) / (2 if k <= 5 else 1)
                for k in (1, 5, 10, 20)}
    assert metrics == {f"samples_pass_at_{k}": pytest.approx(v) for k, v in expected.items()}
    assert metrics["samples_pass_at_20"] == 1.0 and metrics["samples_pass_at_1"] == pytest.approx(3 / 40)
    frame = results_table(_results([True, False], samples_passed=[twenty, [False] * 5]))
    row = pipeline_summary(frame).iloc[0]
    for k, value in expected.items():
        assert row[f"samples_pass@{k}"] == pytest.approx(value)
    assert "samples_pass@1" not in pipeline_summary(results_table(_results([True])))


def test_sample_coverage_notice_when_some_attempts_drew_fewer_than_k_samples():
    # A greedy-first vote: the third problem's greedy answer passed, so it drew no sample.
    frame = results_table(_results([True, False, True], samples_passed=[[True] * 20, [False] * 5, []]))
    summary = pipeline_summary(frame)
    assert summary.iloc[0]["samples_pass@20_attempts"] == 1
    assert sample_coverage_notices(summary) == [
        "p: samples_pass@1 over 2, @5 over 2, @10 over 1, @20 over 1 of its 3 attempts "
        "(those that drew at least k samples), not over every problem"
    ]
    everywhere = results_table(_results([True, False], samples_passed=[[True] * 20, [False] * 20]))
    assert sample_coverage_notices(pipeline_summary(everywhere)) == []
    assert sample_coverage_notices(pipeline_summary(results_table(_results([True])))) == []


def test_search_metrics_say_whether_the_tree_held_a_passing_node_and_it_was_missed():
    assert search_metrics(_results([True])) == {}
    metrics = search_metrics(_results(
        [True, False, False], nodes_passed=[[False, True], [True, False, False], [False]],
    ))
    assert metrics == {"tree_has_passing_node_rate": pytest.approx(2 / 3), "passing_node_not_chosen": 1,
                       "mean_nodes": 2.0}


def test_distinguishing_metrics_count_selection_accuracy_and_replacements_of_the_greedy_answer():
    # Candidate 0 is the greedy answer. T/0: replaced rightly; T/1: replaced wrongly; T/2: kept and
    # right; T/3: nothing passes (not in selection accuracy); T/4: replaced, both fail.
    results = _results(
        [True, False, True, False, False],
        candidates_passed=[[False, True], [True, False], [True, True], [False, False], [False, True]],
        greedy_replaced=[True, True, False, False, True],
        inputs_kept=[3, 2, 0, 1, 4], inputs_dropped=[1, 0, 0, 0, 2], judge_calls=[1, 1, 0, 0, 2],
    )
    metrics = summarize(results)
    assert metrics["selection_accuracy"] == pytest.approx(2 / 4)  # T/0 and T/2 of the four solvable
    assert metrics["candidates_have_passing_rate"] == pytest.approx(4 / 5)
    replaced = ("greedy_replaced", "greedy_replaced_right", "greedy_replaced_wrong")
    assert [metrics[name] for name in replaced] == [3, 1, 1]
    assert (metrics["inputs_kept"], metrics["inputs_dropped"], metrics["judge_calls"]) == (10, 3, 4)
    nothing = summarize(_results([False], candidates_passed=[[False]], greedy_replaced=[False]))
    assert "selection_accuracy" not in nothing and nothing["greedy_replaced"] == 0
    assert "selection_accuracy" not in summarize(_results([True]))  # another pipeline's results
