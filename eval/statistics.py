"""Statistics for comparing pipelines: pure functions over pandas/numpy.

Every test statistic comes from a library (statsmodels, scipy) rather than being re-derived, so
the numbers in a report can be checked against the reference implementation. The input is the
per-problem table the runner logs (``problems.parquet``: one row per problem × seed, columns
``task_id, pipeline, seed, passed, …, extra.*``), concatenated over child runs.

Every interval lies inside the range its quantity can take and contains its own estimate, for
every sample size and count (checked exhaustively and by property tests): library results are
exact up to floating-point rounding, and the last ulps are clamped rather than trusted, so a
plot's error bars are never negative. Metrics that do not apply to a pipeline are absent, by
the rule stated in :mod:`critiquelab.eval.summary`; a pipeline's own metrics come from its outcome model
(passed in by compare), never from which ``extra.*`` columns a table happens to have.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd

from critiquelab.core.errors import UserError
from critiquelab.eval.results import results_from_table
from critiquelab.eval.summary import FigureMetrics

CONFIDENCE = 0.95
TOKENS_UNIT = 1000  # cost-normalised pass@1 is "problems solved per 1k tokens"
# A 95% percentile interval reads the 2.5th and 97.5th percentiles of the resampled differences;
# below ~100 resamples each tail holds two or fewer of them, so the bounds are near-extremes of a
# handful of draws and jump with the seed. The cap keeps the stored distribution to 8 MB.
MIN_RESAMPLES = 99
MAX_RESAMPLES = 1_000_000
MAX_SEED = 2**32 - 1  # numpy's seed range (RandomState; default_rng accepts it too)
_RESAMPLE_BATCH = 10_000  # resamples drawn at once: bounds memory, same numbers as one draw


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test on paired pass/fail: only the discordant pairs carry information."""

    both: int  # both pass
    only_a: int  # b in the usual notation: A passes, B fails
    only_b: int  # c: B passes, A fails
    neither: int
    pvalue: float


@dataclass(frozen=True)
class BootstrapResult:
    """Paired bootstrap CI of ``mean(a) - mean(b)``; ``seed`` and ``n_resamples`` make it replayable."""

    difference: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    seed: int
    method: str


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_confidence(confidence: float, name: str = "confidence") -> None:
    """``confidence`` is a level strictly between 0 and 1; else :class:`UserError` naming ``name``."""
    if isinstance(confidence, bool) or not isinstance(confidence, Real) or not 0 < confidence < 1:
        raise UserError(f"{name} must be a number strictly between 0 and 1 (e.g. 0.95); got {confidence!r}")


def check_bootstrap_options(
    n_resamples: int, seed: int, confidence: float = CONFIDENCE, *,
    resamples_name: str = "n_resamples", seed_name: str = "seed",
) -> None:
    """The bootstrap's options before anything runs: one-line :class:`UserError` naming the
    option (the CLI passes its flag names) and the allowed range."""
    if not _is_int(n_resamples) or not MIN_RESAMPLES <= n_resamples <= MAX_RESAMPLES:
        raise UserError(f"{resamples_name} must be an integer from {MIN_RESAMPLES} to {MAX_RESAMPLES} "
                        f"(bootstrap resamples); got {n_resamples!r}")
    if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise UserError(f"{seed_name} must be an integer from 0 to {MAX_SEED} (numpy's seed range); "
                        f"got {seed!r}")
    check_confidence(confidence)


def _bracket(estimate: float, low: float, high: float, floor: float, ceiling: float) -> tuple[float, float]:
    """``[low, high]`` kept inside ``[floor, ceiling]`` and reaching ``estimate`` on both sides;
    an undefined (NaN) interval stays undefined."""
    if math.isnan(low) or math.isnan(high) or math.isnan(estimate):
        return low, high
    return min(max(low, floor), estimate), max(min(high, ceiling), estimate)


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for a proportion: unlike the normal approximation it stays inside
    [0, 1] and keeps its coverage at pass rates near 0 or 1 and at HumanEval-sized samples.

    Always ``0 <= low <= successes / n <= high <= 1``. The formula's bounds at 0 and n
    successes are exactly 0 and 1, but computed they come back as e.g. 5.6e-17 (0 of 3) or
    0.9999999999999999 (20 of 20), on the wrong side of the estimate; those ulps are clamped.
    """
    check_confidence(confidence)
    if n <= 0:
        return (float("nan"), float("nan"))
    if not 0 <= successes <= n:
        raise ValueError(f"a proportion needs 0 <= successes <= n; got {successes} of {n}")
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    return _bracket(successes / n, float(low), float(high), 0.0, 1.0)


def mcnemar_exact(a: Sequence[bool] | np.ndarray, b: Sequence[bool] | np.ndarray) -> McNemarResult:
    """Exact (binomial) McNemar test of paired outcomes ``a[i]`` vs ``b[i]``.

    Exact rather than chi-square because the number of discordant problems is usually small.
    With no discordant pair the two pipelines are indistinguishable: p = 1.
    """
    from statsmodels.stats.contingency_tables import mcnemar

    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes need equal lengths; got {a.shape} and {b.shape}")
    table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    pvalue = float(mcnemar(table, exact=True).pvalue)
    return McNemarResult(table[0][0], table[0][1], table[1][0], table[1][1], pvalue)


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    difference: np.ndarray = np.mean(x, axis=axis) - np.mean(y, axis=axis)
    return difference


def paired_bootstrap(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, seed: int = 0,
    n_resamples: int = 9999, confidence: float = CONFIDENCE, method: str = "percentile",
) -> BootstrapResult:
    """Bootstrap CI of the difference in means, resampling problems (pairs) with replacement.

    Percentile rather than BCa by default: per-problem outcomes are 0/1, so the jackknife behind
    BCa is often degenerate (BCa returns NaN when A and B agree everywhere), while the
    percentile interval then correctly collapses to the single observed difference.

    The interval lies within the range of the per-pair differences (within [-1, 1] for 0/1
    outcomes) and contains the observed difference: with few discordant pairs the resampled
    differences are lumpy and a percentile may land just past the observed value by Monte-Carlo
    chance; the interval is then widened to it (conservative, never narrower). Fewer than two
    pairs have no sampling spread to resample: the CI is NaN.
    """
    from scipy.stats import bootstrap

    check_bootstrap_options(n_resamples, seed, confidence)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples need equal 1-d shapes; got {x.shape} and {y.shape}")
    difference = float(_mean_difference(x, y)) if len(x) else float("nan")
    if len(x) < 2:
        return BootstrapResult(difference, float("nan"), float("nan"), confidence, 0, seed, method)
    result = bootstrap(
        (x, y), _mean_difference, paired=True, vectorized=True, n_resamples=n_resamples,
        batch=_RESAMPLE_BATCH, confidence_level=confidence, method=method, rng=np.random.default_rng(seed),
    )
    per_pair = x - y
    ci_low, ci_high = (float(bound) for bound in result.confidence_interval)
    low, high = _bracket(difference, ci_low, ci_high, float(per_pair.min()), float(per_pair.max()))
    return BootstrapResult(difference, low, high, confidence, n_resamples, seed, method)


def _bools(frame: pd.DataFrame, column: str) -> pd.Series:
    return frame[column].fillna(False).astype(bool)


def sample_coverage_notices(summary: pd.DataFrame) -> list[str]:
    """One line per pipeline whose ``samples_pass@k`` covers only some attempts — a budgeted or
    greedy-first vote samples only where it needs to, usually the harder problems, so its
    samples_pass@k is not comparable with a pass@k over every problem."""
    from critiquelab.eval.metrics import SAMPLE_KS

    notices = []
    for _, row in summary.iterrows():
        counts = {k: row.get(f"samples_pass@{k}_attempts") for k in SAMPLE_KS}
        covered = [f"@{k} over {int(n)}" for k, n in counts.items() if pd.notna(n) and n < row["attempts"]]
        if covered:
            notices.append(
                f"{row['pipeline']}: samples_pass{', '.join(covered)} of its {int(row['attempts'])} attempts "
                "(those that drew at least k samples), not over every problem"
            )
    return notices


def pipeline_summary(
    frame: pd.DataFrame, confidence: float = CONFIDENCE, figures: Mapping[str, FigureMetrics] | None = None,
) -> pd.DataFrame:
    """One row per pipeline label: pass@1 with a Wilson CI, cost, and the pipeline's own metrics.

    Several seeds are pooled: every (problem, seed) row is one attempt, so pass@1 is the share of
    attempts passed (= the mean of per-seed pass@1 when seeds cover the same problems), the CI is
    Wilson on the pooled counts, and ``seed_sd`` is the spread of per-seed pass@1. Costs are means
    per attempt. ``pass@1_per_1k_tokens`` = pass@1 / (total tokens per problem / 1000), i.e.
    problems solved per 1000 tokens spent. ``figures``: per label, the metrics of the
    pipeline's own figures over its rows read back as results (compare passes each pipeline's
    ``critiquelab.pipelines.outcomes.Outcome.table_metrics``); a label without one has only the common
    columns. Metrics that do not apply to a pipeline (see :mod:`critiquelab.eval.summary`) are missing from
    its row: NaN in the frame, "–" in the report.
    """
    check_confidence(confidence)
    figures = figures or {}
    rows: list[dict[str, Any]] = []
    for label, group in frame.groupby("pipeline", sort=False):
        group = group.dropna(axis=1, how="all")  # other pipelines' extra.* columns
        passed = _bools(group, "passed")
        low, high = wilson_interval(int(passed.sum()), len(group), confidence)
        per_seed = group.groupby("seed")["passed"].mean()
        tokens = float(group["total_tokens"].mean())
        row: dict[str, Any] = {
            "pipeline": label,
            "seeds": len(per_seed),
            "problems": group["task_id"].nunique(),
            "attempts": len(group),
            "passed": int(passed.sum()),
            "pass@1": float(passed.mean()),
            "ci_low": low,
            "ci_high": high,
            "seed_sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else float("nan"),
            "prompt_tokens/problem": float(group["prompt_tokens"].mean()),
            "completion_tokens/problem": float(group["completion_tokens"].mean()),
            "tokens/problem": tokens,
            "lm_calls/problem": float(group["lm_calls"].mean()) if "lm_calls" in group else float("nan"),
            "messages/problem": float(group["messages"].mean()) if "messages" in group else float("nan"),
            "iterations": float(group["iterations"].mean()),
            "pass@1_per_1k_tokens": float(passed.mean()) / (tokens / TOKENS_UNIT) if tokens else float("nan"),
        }
        if label in figures:
            row.update(figures[label](results_from_table(group)))
        rows.append(row)
    return pd.DataFrame(rows)


def _seed_pairing(seeds_a: list[int], seeds_b: list[int]) -> list[tuple[int, int]]:
    """Seeds both pipelines ran are paired with themselves (same sampling seed); when none are
    shared (runs from different experiments) seeds are paired by rank."""
    common = sorted(set(seeds_a) & set(seeds_b))
    if common:
        return [(s, s) for s in common]
    return list(zip(sorted(seeds_a), sorted(seeds_b), strict=False))


def paired_outcomes(frame: pd.DataFrame, a: str, b: str) -> tuple[pd.DataFrame, str]:
    """Pass/fail of pipelines ``a`` and ``b`` on the same (problem, seed) units, and how seeds
    were paired. Only problems present in both are kept."""
    rows_a, rows_b = frame[frame["pipeline"] == a], frame[frame["pipeline"] == b]
    pairs = _seed_pairing(sorted(rows_a["seed"].unique()), sorted(rows_b["seed"].unique()))
    joined = []
    for seed_a, seed_b in pairs:
        left = rows_a[rows_a["seed"] == seed_a][["task_id", "passed"]]
        right = rows_b[rows_b["seed"] == seed_b][["task_id", "passed"]]
        merged = left.merge(right, on="task_id", suffixes=("_a", "_b"))
        merged["seed_a"], merged["seed_b"] = seed_a, seed_b
        joined.append(merged)
    units = pd.concat(joined, ignore_index=True) if joined else pd.DataFrame(
        columns=["task_id", "passed_a", "passed_b", "seed_a", "seed_b"])
    description = ", ".join(str(sa) if sa == sb else f"{sa}~{sb}" for sa, sb in pairs)
    return units, f"task × seed ({description})"


def pairwise_tests(
    frame: pd.DataFrame, *, seed: int = 0, n_resamples: int = 9999, confidence: float = CONFIDENCE,
) -> pd.DataFrame:
    """Every pair of pipelines (in table order): exact McNemar and a paired bootstrap CI of
    pass@1(A) − pass@1(B), both over the same paired units.

    With several seeds a problem contributes one unit per seed; those units are correlated, so
    the p-value and CI are then somewhat optimistic (noted in the report).
    """
    check_bootstrap_options(n_resamples, seed, confidence)
    labels = list(dict.fromkeys(frame["pipeline"]))
    rows = []
    for a, b in combinations(labels, 2):
        units, pairing = paired_outcomes(frame, a, b)
        pa, pb = units["passed_a"].astype(bool).to_numpy(), units["passed_b"].astype(bool).to_numpy()
        test = mcnemar_exact(pa, pb)
        boot = paired_bootstrap(pa, pb, seed=seed, n_resamples=n_resamples, confidence=confidence)
        rows.append({
            "a": a, "b": b, "pairs": len(units), "problems": units["task_id"].nunique(),
            "pairing": pairing,
            "pass@1_a": float(pa.mean()) if len(pa) else np.nan,
            "pass@1_b": float(pb.mean()) if len(pb) else np.nan,
            "difference": boot.difference, "ci_low": boot.low, "ci_high": boot.high,
            "only_a": test.only_a, "only_b": test.only_b, "both": test.both, "neither": test.neither,
            "mcnemar_p": test.pvalue if len(units) else float("nan"),  # no shared problem: no test
            "bootstrap_seed": boot.seed, "bootstrap_resamples": boot.n_resamples,
        })
    return pd.DataFrame(rows)
