"""critiquelab.eval.statistics against known values: exact McNemar, Wilson, a seeded paired bootstrap, and
the per-pipeline aggregation over seeds on hand-built tables (each pipeline's own metrics:
tests/pipelines/test_outcome_summaries.py)."""

import math

import numpy as np
import pandas as pd
import pytest

from critiquelab.eval.statistics import (
    mcnemar_exact,
    paired_bootstrap,
    pairwise_tests,
    pipeline_summary,
    wilson_interval,
)


def _outcomes(both, only_a, only_b, neither):
    a = [True] * both + [True] * only_a + [False] * only_b + [False] * neither
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    return a, b


def test_mcnemar_exact_known_pvalues():
    result = mcnemar_exact(*_outcomes(both=5, only_a=1, only_b=9, neither=3))
    assert (result.both, result.only_a, result.only_b, result.neither) == (5, 1, 9, 3)
    assert result.pvalue == pytest.approx(0.021484375)  # 2 * P(Binom(10, .5) <= 1) = 22/1024
    assert mcnemar_exact(*_outcomes(4, 3, 3, 2)).pvalue == 1.0
    assert mcnemar_exact(*_outcomes(4, 0, 0, 2)).pvalue == 1.0  # identical pipelines


def test_mcnemar_rejects_unpaired_input():
    with pytest.raises(ValueError):
        mcnemar_exact([True, False], [True])


def test_wilson_interval_known_value():
    low, high = wilson_interval(7, 10)
    # (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), z = 1.959964
    assert low == pytest.approx(0.396778, abs=1e-6)
    assert high == pytest.approx(0.892209, abs=1e-6)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(0, 20)[1] > 0.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_paired_bootstrap_is_deterministic_and_covers_true_difference():
    a = np.array([True] * 140 + [False] * 60)
    b = a.copy()
    b[:30] = False  # B fails 30 problems A solves: the true difference is exactly 0.15
    first = paired_bootstrap(a, b, seed=7, n_resamples=2000)
    again = paired_bootstrap(a, b, seed=7, n_resamples=2000)
    assert (first.low, first.high) == (again.low, again.high)
    assert (first.seed, first.n_resamples, first.method) == (7, 2000, "percentile")
    assert first.difference == pytest.approx(0.15)
    assert 0.0 < first.low < 0.15 < first.high < 0.25  # excludes 0, contains the truth
    reversed_ = paired_bootstrap(b, a, seed=7, n_resamples=2000)
    assert reversed_.difference == pytest.approx(-0.15) and reversed_.high < 0.0


def test_paired_bootstrap_of_identical_outcomes_is_zero_width():
    a = np.array([1, 0, 1, 1, 0] * 8, dtype=bool)
    result = paired_bootstrap(a, a.copy(), seed=0, n_resamples=500)
    assert (result.difference, result.low, result.high) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_constant_shift_is_degenerate_at_the_shift():
    result = paired_bootstrap(np.ones(30), np.zeros(30), seed=0, n_resamples=500)
    assert (result.low, result.high) == (1.0, 1.0)


def _rows(label, seed, passed, **extra):
    return [
        {"task_id": f"T/{i}", "pipeline": label, "seed": seed, "passed": p,
         "status": "passed" if p else "failed",
         "iterations": 1, "prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150, "lm_calls": 1,
         **{f"extra.{k}": v[i] for k, v in extra.items()}}
        for i, p in enumerate(passed)
    ]


def test_seed_pooling_and_each_labels_own_figures():
    debate = _rows(
        "debate", 0, [True, True, False, False], consensus=[True, True, True, False],
    ) + _rows("debate", 1, [True, False, False, False], consensus=[False] * 4)
    seen = {}

    def figures(results):
        seen["results"] = results
        return {"consensus_rate": sum(r.extra["consensus"] for r in results) / len(results)}

    frame = pd.DataFrame(debate + _rows("plain", 0, [True, False]))
    table = pipeline_summary(frame, figures={"debate": figures}).set_index("pipeline")
    row = table.loc["debate"]
    assert (row["problems"], row["attempts"], row["seeds"]) == (4, 8, 2)
    assert row["pass@1"] == pytest.approx(3 / 8)
    assert row["seed_sd"] == pytest.approx(np.std([0.5, 0.25], ddof=1))
    assert row["pass@1_per_1k_tokens"] == pytest.approx((3 / 8) / 0.15)
    assert row["consensus_rate"] == pytest.approx(3 / 8)
    # The label's own rows, read back into results; a label without a figure summary has none.
    outcomes = {0: [True, True, False, False], 1: [True, False, False, False]}
    assert [(r.task_id, r.seed, r.passed) for r in seen["results"]] == [
        (f"T/{i}", seed, p) for seed, passed in outcomes.items() for i, p in enumerate(passed)]
    assert pd.isna(table.loc["plain", "consensus_rate"])


def test_pairwise_tests_pair_on_task_and_seed():
    a = _rows("a", 0, [True] * 10) + _rows("a", 1, [True] * 10)
    b = _rows("b", 0, [False] + [True] * 9) + _rows("b", 1, [True] * 10)
    c = _rows("c", 5, [False] * 8)  # no shared seed, fewer problems: paired by rank, on 8 problems
    pairs = pairwise_tests(pd.DataFrame(a + b + c), seed=3, n_resamples=500).set_index(["a", "b"])
    assert list(pairs.index) == [("a", "b"), ("a", "c"), ("b", "c")]
    ab = pairs.loc[("a", "b")]
    assert (ab["pairs"], ab["problems"], ab["only_a"], ab["only_b"]) == (20, 10, 1, 0)
    assert ab["difference"] == pytest.approx(0.05)
    assert ab["mcnemar_p"] == 1.0
    ac = pairs.loc[("a", "c")]
    assert (ac["pairs"], ac["only_a"]) == (8, 8)
    assert ac["mcnemar_p"] == pytest.approx(2 / 2**8)
    assert "0~5" in ac["pairing"]


def test_pairwise_without_shared_problems_has_no_test():
    frame = pd.DataFrame(_rows("a", 0, [True] * 3) + [
        {**row, "task_id": f"U/{i}"} for i, row in enumerate(_rows("b", 0, [False] * 3))])
    pair = pairwise_tests(frame).iloc[0]
    assert pair["pairs"] == 0 and math.isnan(pair["mcnemar_p"]) and math.isnan(pair["difference"])
