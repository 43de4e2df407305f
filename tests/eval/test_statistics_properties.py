"""The class, not the example: every interval critiquelab.eval.statistics produces lies inside the range of
its quantity and contains its own estimate, for every sample size and count (issue #21: the
Wilson bound came back as 5.6e-17 or 0.9999999999999999 and crashed the pass@1 plot)."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from critiquelab.core.errors import UserError
from critiquelab.eval.metrics import pass_at_k
from critiquelab.eval.statistics import (
    MAX_RESAMPLES,
    MAX_SEED,
    MIN_RESAMPLES,
    check_bootstrap_options,
    mcnemar_exact,
    paired_bootstrap,
    wilson_interval,
)

SETTINGS = settings(max_examples=150, deadline=None)
LEVELS = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99, 0.999])


def _wilson_closed_form(k: int, n: int, confidence: float) -> tuple[float, float]:
    z = norm.ppf(1 - (1 - confidence) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_interval_exhaustively_for_every_count_up_to_199(confidence):
    for n in range(1, 200):
        for k in range(n + 1):
            low, high = wilson_interval(k, n, confidence)
            assert 0.0 <= low <= k / n <= high <= 1.0, (k, n, low, high)
            if k == 0:
                assert low == 0.0
            if k == n:
                assert high == 1.0
            # Clamping moves a bound by rounding error only, never hides a wrong formula.
            expected = _wilson_closed_form(k, n, confidence)
            assert (low, high) == pytest.approx(expected, abs=1e-12), (k, n)


def test_wilson_interval_reported_counts():
    """Counts whose raw bounds sat on the wrong side of the estimate (which ones depends on
    rounding: 20 of 20 at alpha = 0.05 exactly, 25 of 25 and 0 of 25 at alpha = 1 - 0.95)."""
    for n in (10, 13, 20, 25, 28):
        assert wilson_interval(n, n)[1] == 1.0
        assert wilson_interval(0, n)[0] == 0.0
    assert wilson_interval(0, 3)[0] == 0.0
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(21, 20)


@SETTINGS
@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), LEVELS)
def test_wilson_interval_is_inside_unit_range_and_around_the_estimate(n_k, confidence):
    n, k = n_k
    low, high = wilson_interval(k, n, confidence)
    assert 0.0 <= low <= k / n <= high <= 1.0
    narrow_low, narrow_high = wilson_interval(k, n, 0.5)  # LEVELS are >= 0.5: nested inside
    assert low <= narrow_low <= narrow_high <= high


def _paired(min_size: int = 0, max_size: int = 120):
    return st.integers(min_size, max_size).flatmap(lambda n: st.tuples(
        st.lists(st.booleans(), min_size=n, max_size=n), st.lists(st.booleans(), min_size=n, max_size=n)))


@SETTINGS
@given(_paired())
def test_mcnemar_pvalue_is_a_probability_and_symmetric(pair):
    a, b = pair
    result = mcnemar_exact(a, b)
    assert 0.0 <= result.pvalue <= 1.0
    assert result.both + result.only_a + result.only_b + result.neither == len(a)
    assert mcnemar_exact(b, a).pvalue == pytest.approx(result.pvalue)
    if result.only_a == result.only_b:
        assert result.pvalue == 1.0


@SETTINGS
@given(_paired(min_size=2), st.integers(0, MAX_SEED), st.integers(MIN_RESAMPLES, 400), LEVELS)
def test_paired_bootstrap_ci_is_inside_unit_range_and_contains_the_difference(pair, seed, resamples, level):
    a, b = pair
    result = paired_bootstrap(a, b, seed=seed, n_resamples=resamples, confidence=level)
    observed = np.mean(a) - np.mean(b)
    assert result.difference == pytest.approx(observed)
    assert -1.0 <= result.low <= result.difference <= result.high <= 1.0
    if a == b:
        assert result.low == result.high == 0.0


@SETTINGS
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=40), st.integers(0, 1000))
def test_paired_bootstrap_ci_stays_within_the_per_pair_differences(values, seed):
    a = np.asarray(values)
    b = np.zeros_like(a)
    result = paired_bootstrap(a, b, seed=seed, n_resamples=MIN_RESAMPLES)
    assert result.low <= result.difference <= result.high
    slack = 1e-12 * max(1.0, float(np.abs(a).max()))  # the mean itself may round past an extreme
    assert a.min() - slack <= result.low and result.high <= a.max() + slack


@SETTINGS
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_at_k_is_a_probability_and_grows_with_k(n_c):
    n, c = n_c
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(earlier <= later for earlier, later in itertools.pairwise(values))
    assert values[0] == pytest.approx(c / n)
    assert values[-1] == (1.0 if c else 0.0)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (dict(n_resamples=0, seed=0), "n_resamples"),
        (dict(n_resamples=MIN_RESAMPLES - 1, seed=0), "n_resamples"),
        (dict(n_resamples=MAX_RESAMPLES + 1, seed=0), "n_resamples"),
        (dict(n_resamples=999.5, seed=0), "n_resamples"),
        (dict(n_resamples=True, seed=0), "n_resamples"),
        (dict(n_resamples=999, seed=-1), "seed"),
        (dict(n_resamples=999, seed=MAX_SEED + 1), "seed"),
        (dict(n_resamples=999, seed=0, confidence=1.0), "confidence"),
        (dict(n_resamples=999, seed=0, confidence=0), "confidence"),
        (dict(n_resamples=999, seed=0, confidence=float("nan")), "confidence"),
    ],
)
def test_bootstrap_options_out_of_range_are_one_line_user_errors(options, named):
    with pytest.raises(UserError) as caught:
        check_bootstrap_options(**options)
    message = str(caught.value)
    assert message.startswith(named) and "\n" not in message
    with pytest.raises(UserError):
        paired_bootstrap([True, False, True], [False, False, True], **options)


def test_bootstrap_option_bounds_are_accepted():
    for resamples, seed in ((MIN_RESAMPLES, 0), (MAX_RESAMPLES, MAX_SEED)):
        check_bootstrap_options(resamples, seed, 0.95)
    result = paired_bootstrap([1, 0, 1, 1], [0, 0, 1, 0], seed=MAX_SEED, n_resamples=MIN_RESAMPLES)
    assert result.low <= 0.5 <= result.high
