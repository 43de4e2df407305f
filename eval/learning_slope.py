"""Does a pipeline learn over its run? The slope test of its learning curve against a reference.

A memory pipeline can only help on later problems, so the question is whether its later problems
go better than its earlier ones. But the order itself matters: with one ordering of 40 problems
the late half may simply be easier. A reference run without memory (the baseline, or the same
pipeline without memory) over the same orderings measures that order effect, so the test is a
difference in differences. Per ordering (a seed's problem order) and position in it, ``x`` is the
arm's outcome minus the reference's on the same problem (1, 0 or −1); the early half is the first
⌊n/2⌋ positions, the late half the last ⌊n/2⌋ (the middle one of an odd count in neither), and

    difference = mean over orderings of ( mean x over the late half − mean x over the early half )
               = (late − early of the arm) − (late − early of the reference).

Two tests, because the orderings are few:

- over orderings: a one-sample t-test of the per-ordering differences against 0
  (``scipy.stats.ttest_1samp``). Orderings are independent runs, so this is the valid unit even
  though memory makes the positions of one ordering depend on each other; with 3 orderings it has
  2 degrees of freedom and little power (absent with fewer than 2, or when all are equal);
- over positions: a permutation test of the late-half ``x`` against the early-half ``x``, pooled
  over orderings (``scipy.stats.permutation_test``, two-sided, seeded): problems × orderings
  positions give it power, at the price of treating positions as exchangeable under the null of
  no learning — which a memory that helps or hurts from some point on can break, so its p is the
  optimistic one of the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class SlopeTest:
    """A pipeline's late-minus-early change against its reference's over the same orderings."""

    pipeline: str
    reference: str
    orderings: int
    half: int  # positions in each half of one ordering (the smallest over the orderings)
    change: float  # the pipeline's late − early pass@1, mean over orderings
    reference_change: float  # the reference's, on the same problems at the same positions
    difference: float  # change − reference_change
    per_ordering: tuple[float, ...]
    p_orderings: float  # t-test over the per-ordering differences; nan where it cannot be made
    p_positions: float  # permutation test over positions; nan with one position a side


def _halves(n: int) -> tuple[slice, slice]:
    half = n // 2
    return slice(0, half), slice(n - half, n)


def slope_test(
    problems: pd.DataFrame, pipeline: str, reference: str, *, seed: int, n_resamples: int
) -> SlopeTest | None:
    """The test for ``pipeline`` against ``reference`` over the orderings (seeds) both ran, each
    on the same problems; None when there is none (or one of fewer than two problems).
    ``problems`` is compare's frame: each run's rows in the order it solved them."""
    from scipy import stats

    reference_rows = problems[problems["pipeline"] == reference]
    per_ordering, changes, reference_changes, halves = [], [], [], []
    late_x: list[float] = []
    early_x: list[float] = []
    for ordering, run in problems[problems["pipeline"] == pipeline].groupby("seed", sort=True):
        theirs = reference_rows[reference_rows["seed"] == ordering].set_index("task_id")["passed"]
        tasks = list(run["task_id"])
        if len(tasks) < 2 or not set(tasks) <= set(theirs.index):
            continue
        ours = run["passed"].astype(float).to_numpy()
        base = theirs.loc[tasks].astype(float).to_numpy()
        early, late = _halves(len(tasks))
        x = ours - base
        per_ordering.append(float(x[late].mean() - x[early].mean()))
        changes.append(float(ours[late].mean() - ours[early].mean()))
        reference_changes.append(float(base[late].mean() - base[early].mean()))
        halves.append(len(tasks) // 2)
        late_x += list(x[late])
        early_x += list(x[early])
    if not per_ordering:
        return None
    spread = len(per_ordering) >= 2 and max(per_ordering) > min(per_ordering)
    p_orderings = float(stats.ttest_1samp(per_ordering, 0.0).pvalue) if spread else math.nan

    def mean_difference(late: np.ndarray, early: np.ndarray, axis: int) -> np.ndarray:
        return np.asarray(np.mean(late, axis=axis) - np.mean(early, axis=axis))

    # scipy's permutation test needs two positions a side (not so with 2 or 3 problems in one ordering)
    p_positions = math.nan
    if len(late_x) >= 2 and len(early_x) >= 2:
        permuted = stats.permutation_test(
            (np.array(late_x), np.array(early_x)), mean_difference, permutation_type="independent",
            vectorized=True, n_resamples=n_resamples, alternative="two-sided",
            rng=np.random.default_rng(seed),
        )
        p_positions = float(permuted.pvalue)
    return SlopeTest(
        pipeline, reference, len(per_ordering), min(halves), float(np.mean(changes)),
        float(np.mean(reference_changes)), float(np.mean(per_ordering)), tuple(per_ordering),
        p_orderings, p_positions,
    )


def slope_tests(
    problems: pd.DataFrame, references: Sequence[tuple[str, str]], *, seed: int, n_resamples: int
) -> pd.DataFrame:
    """One row per (pipeline, reference) pair that has a test (see :func:`slope_test`)."""
    found = [slope_test(problems, pipeline, reference, seed=seed, n_resamples=n_resamples)
             for pipeline, reference in references]
    return pd.DataFrame([asdict(test) for test in found if test is not None],
                        columns=list(SlopeTest.__dataclass_fields__))
