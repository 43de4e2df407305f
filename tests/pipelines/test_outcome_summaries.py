"""The outcome models' summaries: metrics whose denominator is empty are absent (never logged as
0), a run's metrics agree with compare's pooled ones (critiquelab.eval.statistics.pipeline_summary given the
pipeline's table metrics) on the same rows, and which summaries apply is the registered model's
to say — never the keys a result happens to hold."""

import numpy as np
import pandas as pd
import pytest

from critiquelab.eval.metrics import pass_at_k
from critiquelab.eval.results import ProblemResult, results_table
from critiquelab.eval.statistics import pipeline_summary, sample_coverage_notices
from critiquelab.eval.verdict import Status
from critiquelab.pipelines.critic_loop.outcome import CriticLoopOutcome
from critiquelab.pipelines.debate.outcome import DebateOutcome
from critiquelab.pipelines.registry import outcome_model
from critiquelab.pipelines.role_play.outcome import RolePlayOutcome
from critiquelab.pipelines.sop.outcome import SopOutcome
from critiquelab.pipelines.threads import ThreadOutcome
from critiquelab.pipelines.tree_search.outcome import TreeSearchOutcome
from critiquelab.pipelines.vote.outcome import VoteOutcome

CRITIQUE_RATES = ("critique_success_rate", "harmful_revision_rate")
DEBATE_KEYS = ("consensus_rate", "consensus_correctness", "final_in_majority_rate", "mean_final_agreement",
               "flips_correct_to_wrong", "flips_wrong_to_correct")


def _results(passed, seed=0, **extra):
    return [
        ProblemResult(task_id=f"T/{i}", pipeline="p", seed=seed, status=Status.PASSED if p else Status.FAILED,
                      prompt_tokens=100, completion_tokens=50, lm_calls=1,
                      extra={k: v[i] for k, v in extra.items()})
        for i, p in enumerate(passed)
    ]


def _pooled(model, results):
    return pipeline_summary(results_table(results), figures={"p": model.table_metrics}).iloc[0]


def test_a_pipeline_gets_the_metrics_of_its_model_whatever_keys_its_results_hold():
    # A baseline result with a stray "consensus" key still has no debate metrics, and one without
    # a first version scored has no revision metrics.
    results = _results([True, False, True], consensus=[True] * 3)
    metrics = outcome_model("baseline").run_metrics(results)
    assert not [k for k in metrics if k in CRITIQUE_RATES + DEBATE_KEYS or k.startswith("samples_")]
    assert "first_pass_at_1" not in metrics
    assert DebateOutcome.run_metrics(results)["consensus_rate"] == 1.0


def test_critique_rates_are_absent_when_nothing_qualifies():
    # Every first draft failed and the critic never asked for changes: neither rate is measurable.
    silent = ThreadOutcome.run_metrics(_results([False, True], first_passed=[False, False],
                                                changes_requested=[False, False]))
    assert silent["first_pass_at_1"] == 0.0
    assert not set(CRITIQUE_RATES) & set(silent)
    assert (silent["harmful_revisions"], silent["critique_rescues"]) == (0, 0)  # real counts
    # First drafts all passed: harmful revisions are measurable, critique success is not.
    perfect = ThreadOutcome.run_metrics(_results([True, True], first_passed=[True, True],
                                                 changes_requested=[True, False]))
    assert perfect["harmful_revision_rate"] == 0.0 and "critique_success_rate" not in perfect
    # Challenged failures exist, no first draft passed: only critique success.
    rescued = ThreadOutcome.run_metrics(_results([True, False], first_passed=[False, False],
                                                 changes_requested=[True, True]))
    assert rescued["critique_success_rate"] == 0.5 and "harmful_revision_rate" not in rescued


def test_revision_metrics_of_a_run_match_compares_pooled_ones():
    passed = [True, True, False, True, False, False]
    first = [True, False, False, True, True, False]
    asked = [False, True, True, False, True, False]
    results = _results(passed, first_passed=first, changes_requested=asked, messages=[4] * 6)
    reference = ThreadOutcome.run_metrics(results)
    row = _pooled(ThreadOutcome, results)
    assert row["first_pass@1"] == pytest.approx(reference["first_pass_at_1"])
    assert row["critique_success_rate"] == pytest.approx(reference["critique_success_rate"])  # 1 of 2
    assert row["harmful_revision_rate"] == pytest.approx(reference["harmful_revision_rate"])  # 1 of 3
    assert row["critique_success_rate"] == pytest.approx(1 / 2)
    assert reference["messages_per_problem"] == 4.0


def test_panel_metrics_per_critic_kind():
    results = _results([True, False, True], first_passed=[False, False, True], changes_requested=[True] * 3,
                       changes_requested_by=[["correctness"], ["correctness", "edge_cases"], ["edge_cases"]])
    metrics = CriticLoopOutcome.run_metrics(results)
    assert (metrics["changes_requested.correctness"], metrics["changes_requested.edge_cases"]) == (2, 2)
    assert metrics["critique_success_rate.correctness"] == 0.5
    assert metrics["critique_success_rate.edge_cases"] == 0.0  # it challenged one failing first version
    assert metrics["critique_success_rate"] == 0.5  # the loop's own, from the same model
    no_panel = _results([True], first_passed=[False], changes_requested=[True])
    without_panel = CriticLoopOutcome.run_metrics(no_panel)
    assert not [k for k in without_panel if k.startswith("changes_requested.")]


def test_debate_without_consensus_or_debater_outcomes():
    metrics = DebateOutcome.run_metrics(_results([True, False], consensus=[False, False],
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
    logged = DebateOutcome.run_metrics(results)
    assert logged["final_in_majority_rate"] == pytest.approx(2 / 3)
    assert logged["mean_final_agreement"] == pytest.approx((1 + 2 / 3 + 2 / 3 + 1 / 3) / 4)
    assert (logged["flips_correct_to_wrong"], logged["flips_wrong_to_correct"]) == (4, 8)
    pooled = _pooled(DebateOutcome, results)
    for logged_key, pooled_key in (("final_in_majority_rate", "final_in_majority_rate"),
                                   ("consensus_rate", "consensus_rate"),
                                   ("consensus_correctness", "consensus_correctness"),
                                   ("mean_final_agreement", "agreement_final")):
        assert logged[logged_key] == pytest.approx(pooled[pooled_key]), logged_key


def test_debate_table_pools_seeds():
    first_seed = _results(
        [True, True, False, False], consensus=[True, True, True, False],
        final_in_majority=[True, False, True, False],
        agreement=[[1 / 3, 1.0], [2 / 3, 2 / 3], [1 / 3, 2 / 3], [1 / 3, 1 / 3]],
        debaters_first_passed=[[True, False, False], [True, True, True], [False] * 3, [True, False, False]],
        debaters_final_passed=[[True, True, True], [True, True, False], [False] * 3, [False] * 3],
    )
    second_seed = _results([True, False, False, False], seed=1, consensus=[False] * 4,
                           final_in_majority=[False] * 4, agreement=[[1 / 3]] * 4,
                           debaters_first_passed=[[False] * 3] * 4, debaters_final_passed=[[False] * 3] * 4)
    frame = pd.concat([results_table(first_seed), results_table(second_seed)], ignore_index=True)
    row = pipeline_summary(frame, figures={"p": DebateOutcome.table_metrics}).iloc[0]
    assert (row["problems"], row["attempts"], row["seeds"]) == (4, 8, 2)
    assert row["seed_sd"] == pytest.approx(np.std([0.5, 0.25], ddof=1))
    assert row["consensus_rate"] == pytest.approx(3 / 8)
    assert row["consensus_correctness"] == pytest.approx(2 / 8)
    assert row["final_in_majority_rate"] == pytest.approx(2 / 3)
    assert (row["flips_correct_to_wrong"], row["flips_wrong_to_correct"]) == (2, 2)
    assert row["flip_c2w_rate"] == pytest.approx(2 / 5)
    assert row["agreement_initial"] == pytest.approx((1 / 3 + 2 / 3 + 1 / 3 + 1 / 3 + 4 / 3) / 8)


def test_sample_metrics_only_for_k_that_some_problem_reached():
    samples = _results([True, False], samples_passed=[[True, False, False], [False] * 3])
    metrics = VoteOutcome.run_metrics(samples)
    assert metrics["samples_pass_at_1"] == pytest.approx(1 / 6)
    assert "samples_pass_at_5" not in metrics and "samples_pass_at_10" not in metrics
    assert VoteOutcome.run_metrics(_results([True])) == {}
    greedy_first = _results([True, False], greedy_answer=[1.0, 0.0], samples_passed=[[], []])
    greedy = VoteOutcome.run_metrics(greedy_first)
    assert greedy == {"greedy_answer_rate": 0.5}


def test_vote_agreement_skips_problems_without_samples():
    row = _pooled(VoteOutcome, _results([True, False, True], samples=[3, 0, 4], largest_group=[3, 0, 2]))
    assert row["vote_agreement"] == pytest.approx((1 + 0.5) / 2)
    alone = _pooled(VoteOutcome, _results([False], samples=[0], largest_group=[0]))
    assert "vote_agreement" not in alone


def test_samples_pass_at_k_up_to_20_in_the_run_metrics_and_compare_table():
    twenty = [True] * 3 + [False] * 17
    results = _results([True, False], samples_passed=[twenty, [False] * 5])
    metrics = VoteOutcome.run_metrics(results)
    expected = {k: (pass_at_k(20, 3, k) + (pass_at_k(5, 0, k) if k <= 5 else 0)) / (2 if k <= 5 else 1)
                for k in (1, 5, 10, 20)}
    assert metrics == {f"samples_pass_at_{k}": pytest.approx(v) for k, v in expected.items()}
    assert metrics["samples_pass_at_20"] == 1.0 and metrics["samples_pass_at_1"] == pytest.approx(3 / 40)
    row = _pooled(VoteOutcome, results)
    for k, value in expected.items():
        assert row[f"samples_pass@{k}"] == pytest.approx(value)
    assert "samples_pass@1" not in _pooled(VoteOutcome, _results([True]))


def test_sample_coverage_notice_when_some_attempts_drew_fewer_than_k_samples():
    # A greedy-first vote: the third problem's greedy answer passed, so it drew no sample.
    results = _results([True, False, True], samples_passed=[[True] * 20, [False] * 5, []])
    summary = pipeline_summary(results_table(results), figures={"p": VoteOutcome.table_metrics})
    assert summary.iloc[0]["samples_pass@20_attempts"] == 1
    assert sample_coverage_notices(summary) == [
        "p: samples_pass@1 over 2, @5 over 2, @10 over 1, @20 over 1 of its 3 attempts "
        "(those that drew at least k samples), not over every problem"
    ]
    everywhere = results_table(_results([True, False], samples_passed=[[True] * 20, [False] * 20]))
    vote = {"p": VoteOutcome.table_metrics}
    assert sample_coverage_notices(pipeline_summary(everywhere, figures=vote)) == []
    assert sample_coverage_notices(pipeline_summary(results_table(_results([True])))) == []


def test_search_metrics_say_whether_the_tree_held_a_passing_node_and_it_was_missed():
    assert TreeSearchOutcome.run_metrics(_results([True])) == {}
    metrics = TreeSearchOutcome.run_metrics(_results(
        [True, False, False], nodes_passed=[[False, True], [True, False, False], [False]],
    ))
    assert metrics == {"tree_has_passing_node_rate": pytest.approx(2 / 3), "passing_node_not_chosen": 1,
                       "mean_nodes": 2.0}


def test_generated_test_accuracy_and_counted_events():
    results = _results([True, True], first_passed=[False, True], generated_tests=[3, 2],
                       generated_tests_correct=[2, 1], handoff_rejections=[1, 0], unvalidated_handoffs=[0, 0])
    metrics = SopOutcome.run_metrics(results)
    assert (metrics["generated_tests"], metrics["generated_test_accuracy"]) == (5, 3 / 5)
    assert (metrics["handoff_rejections"], metrics["unvalidated_handoffs"]) == (1, 0)  # a real 0
    assert _pooled(SopOutcome, results)["generated_test_accuracy"] == 3 / 5
    # Without a reference solution only the count is known: no accuracy, never 0.
    unchecked = SopOutcome.run_metrics(_results([True], generated_tests=[3]))
    assert unchecked == {"generated_tests": 3}
    stopped = _results([True, False], role_flips=[1, 0], no_progress_turns=[0, 1],
                       repeated_instructions=[0, 0])
    role_play = RolePlayOutcome.run_metrics(stopped)
    counts = (role_play["role_flips"], role_play["repeated_instructions"], role_play["no_progress_turns"])
    assert counts == (1, 0, 1)
    assert "handoff_rejections" not in role_play


def test_distinguish_counts_selection_accuracy_and_replacements_of_the_greedy_answer():
    from critiquelab.pipelines.distinguish.outcome import DistinguishOutcome

    # Candidate 0 is the greedy answer. T/0: replaced rightly; T/1: replaced wrongly; T/2: kept and
    # right; T/3: nothing passes (not in selection accuracy); T/4: replaced, both fail.
    results = _results(
        [True, False, True, False, False],
        candidates_passed=[[False, True], [True, False], [True, True], [False, False], [False, True]],
        greedy_replaced=[True, True, False, False, True],
        inputs_kept=[3, 2, 0, 1, 4], inputs_dropped=[1, 0, 0, 0, 2], judge_calls=[1, 1, 0, 0, 2],
    )
    metrics = DistinguishOutcome.run_metrics(results)
    assert outcome_model("distinguish") is DistinguishOutcome
    assert metrics["selection_accuracy"] == pytest.approx(2 / 4)  # T/0 and T/2 of the four solvable
    assert metrics["candidates_have_passing_rate"] == pytest.approx(4 / 5)
    replaced = ("greedy_replaced", "greedy_replaced_right", "greedy_replaced_wrong")
    assert [metrics[name] for name in replaced] == [3, 1, 1]
    assert (metrics["inputs_kept"], metrics["inputs_dropped"], metrics["judge_calls"]) == (10, 3, 4)
    nothing = DistinguishOutcome.run_metrics(
        _results([False], candidates_passed=[[False]], greedy_replaced=[False])
    )
    assert "selection_accuracy" not in nothing and nothing["greedy_replaced"] == 0
    assert "selection_accuracy" not in VoteOutcome.run_metrics(results)  # another pipeline's summaries
