"""The QA engineer of the SOP line: acceptance tests from the spec and the prompt alone, and
the report of running them."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field


class QaReport(BaseModel):
    """The QA engineer's artifact: one version of the code run on the tests."""

    passed: bool = Field(description="True when every test and visible example passed.")
    tests_run: int = Field(ge=0, description="Tests and visible examples run.")
    failures: list[str] = Field(
        default_factory=list, description="Each failure: the call, what it got, what was expected."
    )


class QaEngineer(dspy.Signature):
    """You are a QA engineer. Write acceptance tests for the function from the problem and the
    product manager's specification, without seeing any implementation.

    Write only assert statements of the form `assert function_name(arguments) == expected`, one
    per line, with literal expected values. Work out each expected value by hand from the
    statement. Cover the statement's examples, typical inputs and the specification's edge
    cases. Do not implement the function and do not import anything."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    spec: str = dspy.InputField(desc="The product manager's specification (JSON).")
    n_tests: int = dspy.InputField(desc="How many assert statements to write.")
    acceptance_test_code: str = dspy.OutputField(desc="The assert statements, one per line, as plain code.")
