"""pipelines/with_memory/metrics.py: recall precision does not depend on how the store breaks ties."""

import pytest

from critiquelab.pipelines.with_memory.metrics import tie_fair_top_k


def test_entries_tied_at_the_kth_place_count_by_their_expected_share():
    # Four entries at one distance, two of them relevant, three places: 1.5 relevant expected,
    # and one is certainly among any three of the four.
    ranked = [(0.86, True), (0.86, False), (0.86, True), (0.86, False), (0.97, True)]
    assert tie_fair_top_k(ranked, 3) == (pytest.approx(1.5), pytest.approx(1.0))
    # One place among the four ties: half a relevant entry, and a hit half the time.
    assert tie_fair_top_k(ranked, 1) == (pytest.approx(0.5), pytest.approx(0.5))


def test_without_ties_it_is_plain_precision_at_k():
    ranked = [(0.1, False), (0.2, True), (0.3, False), (0.4, True)]
    assert tie_fair_top_k(ranked, 2) == (1.0, 1.0)
    assert tie_fair_top_k([(0.1, False), (0.2, False), (0.3, True)], 2) == (0.0, 0.0)
    assert tie_fair_top_k([(0.1, True)], 3) == (1.0, 1.0)  # fewer entries than places


def test_the_order_of_tied_entries_does_not_change_the_figures():
    tied = [(0.5, True), (0.5, True), (0.5, False), (0.5, False)]
    assert tie_fair_top_k(tied, 3) == tie_fair_top_k(list(reversed(tied)), 3)
