"""The validation gate: an optimised candidate replaces what it was made from only if its
validation score does not drop — and only if both scores exist.

Why the second half: a missing score is NaN, every comparison with NaN is false, and a gate
written as ``not (after < before)`` (or one that keeps whenever there is nothing to validate
on) would keep a program nothing validated. Here a missing score keeps what was there, and
the decision says why, so the caller can print it and log it on the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GateDecision:
    keep: bool
    reason: str


def gate(before: float | None, after: float | None, *, candidate: str = "candidate") -> GateDecision:
    """Keep ``candidate`` (scored ``after``) over what it was made from (scored ``before``)?"""
    if before is None or after is None or math.isnan(before) or math.isnan(after):
        missing = [name for name, score in (("the program before", before), (f"the {candidate}", after))
                   if score is None or math.isnan(score)]
        return GateDecision(False, f"no validation score for {' or '.join(missing)}: nothing to compare, "
                                   f"so the {candidate} is not kept")
    if after >= before:
        return GateDecision(True, f"validation pass@1 {after:.3f} >= {before:.3f}")
    return GateDecision(False, f"validation pass@1 dropped: {after:.3f} < {before:.3f}")
