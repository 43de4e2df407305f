"""The slope test of a learning curve: late half minus early half of the run order, against a
reference over the same orderings — a difference in differences, tested over orderings and over
problem × ordering positions."""

import math
import random

import pandas as pd
import pytest

from critiquelab.eval.learning_slope import slope_test, slope_tests

PROBLEMS = [f"T/{i}" for i in range(40)]
EASY = set(PROBLEMS[::2])  # what the reference solves: half the problems, wherever they fall


def frame(passes, orderings=3, pipeline="arm"):
    """Rows of ``pipeline`` in each ordering's run order; ``passes(task, position)``."""
    rows = []
    for seed in range(orderings):
        order = list(PROBLEMS)
        random.Random(seed).shuffle(order)
        rows += [{"pipeline": pipeline, "seed": seed, "task_id": task, "passed": passes(task, position)}
                 for position, task in enumerate(order)]
    return pd.DataFrame(rows)


def reference(task, position):
    return task in EASY


def test_learning_beyond_the_order_effect_is_the_difference_in_differences():
    # The arm solves what the reference solves, and in the late half of its order everything.
    problems = pd.concat([frame(reference, pipeline="ref"),
                          frame(lambda task, position: position >= 20 or task in EASY)])
    test = slope_test(problems, "arm", "ref", seed=0, n_resamples=999)
    late_unsolved = [sum(task not in EASY for task in run.task_id[20:]) / 20
                     for _, run in problems[problems.pipeline == "arm"].groupby("seed")]
    assert (test.orderings, test.half) == (3, 20)
    assert test.per_ordering == pytest.approx(late_unsolved)
    assert test.difference == pytest.approx(sum(late_unsolved) / 3)
    assert test.difference == pytest.approx(test.change - test.reference_change)
    assert test.p_positions <= 0.002 and test.p_orderings < 0.05  # 0.002: the least 999 resamples give


def test_an_order_effect_alone_is_no_learning():
    # Both do better late (the late half happens to be easy) and by the same amount.
    def late_is_easy(task, position):
        return position >= 20 or task in EASY

    problems = pd.concat([frame(late_is_easy, pipeline="ref"), frame(late_is_easy)])
    test = slope_test(problems, "arm", "ref", seed=0, n_resamples=999)
    assert test.change > 0.3 and test.change == pytest.approx(test.reference_change)
    assert test.difference == 0 and test.p_positions == 1.0
    assert math.isnan(test.p_orderings)  # every ordering's difference is 0: no spread to test


def test_orderings_the_reference_did_not_run_are_left_out_and_the_test_replays_with_its_seed():
    arm = frame(lambda task, position: (position + len(task)) % 3 == 0)
    problems = pd.concat([frame(reference, orderings=1, pipeline="ref"), arm])
    test = slope_test(problems, "arm", "ref", seed=5, n_resamples=999)
    assert test.orderings == 1 and len(test.per_ordering) == 1 and math.isnan(test.p_orderings)
    assert slope_test(problems, "arm", "ref", seed=5, n_resamples=999) == test
    assert slope_test(problems, "arm", "nobody", seed=5, n_resamples=999) is None
    table = slope_tests(problems, [("arm", "ref"), ("arm", "nobody")], seed=5, n_resamples=999)
    assert list(table.pipeline) == ["arm"] and table.p_positions[0] == test.p_positions


def test_an_odd_count_leaves_the_middle_problem_out():
    odd = pd.DataFrame([{"pipeline": p, "seed": 0, "task_id": f"T/{i}", "passed": p == "arm" and i == 2}
                        for p in ("arm", "ref") for i in range(5)])
    test = slope_test(odd, "arm", "ref", seed=0, n_resamples=999)
    assert test.half == 2 and test.difference == 0  # T/2 is the middle of five: in neither half


def test_one_position_a_side_gives_the_difference_without_a_permutation_p():
    # Two problems in one ordering (a smoke run of a memory spec): the halves are one problem each,
    # too few for a permutation test, yet the difference itself is defined.
    rows = [{"pipeline": pipeline, "seed": 0, "task_id": task, "passed": passed}
            for pipeline, outcomes in (("ref", (True, False)), ("arm", (False, True)))
            for task, passed in zip(PROBLEMS[:2], outcomes, strict=True)]
    test = slope_test(pd.DataFrame(rows), "arm", "ref", seed=0, n_resamples=999)
    assert (test.orderings, test.half) == (1, 1)
    assert test.difference == pytest.approx(2.0)  # arm: 0 → 1; ref: 1 → 0
    assert math.isnan(test.p_positions) and math.isnan(test.p_orderings)
