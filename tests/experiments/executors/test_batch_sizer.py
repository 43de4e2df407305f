"""The Ray executor's batch sizes: one problem until something is measured, then about the target
time of work per call, growing at most twofold per batch, never above the limit, and never more
than an equal share of what is left."""

from __future__ import annotations

import pytest

from critiquelab.experiments.executors.batching import BatchSizer


def test_first_batch_is_one_problem():
    assert BatchSizer(target_s=0.25, max_problems=16).next_size(remaining=100) == 1


def test_size_grows_at_most_twofold_towards_the_target():
    sizer = BatchSizer(target_s=0.25, max_problems=16)
    sizes = []
    for _ in range(6):
        size = sizer.next_size(remaining=1000)
        sizes.append(size)
        sizer.observe(size, size * 0.02)  # 20 ms per problem: 12 fit 0.25 s
    assert sizes == [1, 2, 4, 8, 12, 12]


def test_size_never_exceeds_the_limit_even_for_instant_problems():
    sizer = BatchSizer(target_s=0.25, max_problems=16)
    for _ in range(10):
        size = sizer.next_size(remaining=1000)
        sizer.observe(size, 0.0)
    assert sizer.next_size(remaining=1000) == 16


def test_slow_problems_go_one_at_a_time():
    sizer = BatchSizer(target_s=0.25, max_problems=16)
    sizer.observe(1, 1.0)  # a model call of a second
    assert [sizer.next_size(remaining=50) for _ in range(3)] == [1, 1, 1]


def test_estimate_follows_the_latest_batches():
    sizer = BatchSizer(target_s=0.25, max_problems=16)
    sizer.observe(1, 0.01)
    sizer.observe(4, 4.0)  # the endpoint slowed down
    assert sizer.per_problem_s == pytest.approx(0.5 * 1.0 + 0.5 * 0.01)
    assert sizer.next_size(remaining=100) == 1


def test_places_share_what_is_left():
    sizer = BatchSizer(target_s=1.0, max_problems=16)
    for _ in range(5):
        sizer.observe(1, 0.001)
        sizer.next_size(remaining=1000)
    assert sizer.next_size(remaining=10, places=4) == 3  # not all ten to the first place
    assert sizer.next_size(remaining=2, places=1) == 2
    assert sizer.next_size(remaining=0) == 0
