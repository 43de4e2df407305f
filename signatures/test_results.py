"""The typed input field through which a revising role reads what the problem's tests say.

Added to a role's signature only for a positive control (``control: oracle_feedback``), so
prompts of every other run stay exactly as they were; the field comes last, after the inputs
every run shares, so a served model's prompt cache still holds the shared prefix.
"""

from __future__ import annotations

import dspy
from dspy.signatures.signature import Signature

TEST_RESULTS_FIELD = "test_results"
TEST_RESULTS_DESC = (
    "The problem's tests run on the current implementation: PASS, or FAIL with the failing check "
    "(`candidate` is the function), the call and what it returned or raised. Make them pass."
)


def with_test_results(signature: type[Signature]) -> type[Signature]:
    """``signature`` with the ``test_results`` input field appended."""
    field = dspy.InputField(desc=TEST_RESULTS_DESC)
    extended: type[Signature] = signature.append(TEST_RESULTS_FIELD, field, type_=str)
    return extended
