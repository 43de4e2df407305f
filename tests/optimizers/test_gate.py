"""The validation gate: keep only when validation does not drop, and never on a missing score."""

import pytest

from critiquelab.optimizers.gate import gate

NAN = float("nan")


@pytest.mark.parametrize("before, after, keep, reason", [
    (0.5, 0.5, True, "validation pass@1 0.500 >= 0.500"),
    (0.5, 0.75, True, "validation pass@1 0.750 >= 0.500"),
    (0.5, 0.25, False, "validation pass@1 dropped: 0.250 < 0.500"),
    (NAN, NAN, False, "no validation score for the program before or the compiled program: nothing to "
                      "compare, so the compiled program is not kept"),
    (0.5, NAN, False, "no validation score for the compiled program: nothing to compare, so the "
                      "compiled program is not kept"),
    (NAN, 1.0, False, "no validation score for the program before: nothing to compare, so the "
                      "compiled program is not kept"),
    (None, 1.0, False, "no validation score for the program before: nothing to compare, so the "
                       "compiled program is not kept"),
])
def test_gate_keeps_only_a_candidate_validated_no_worse(before, after, keep, reason):
    decision = gate(before, after, candidate="compiled program")
    assert (decision.keep, decision.reason) == (keep, reason)
