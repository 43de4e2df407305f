"""The test-writer role: test cases written from the problem statement alone (CodeT's generated
tests, the SOP line's QA engineer)."""

from __future__ import annotations

import dspy


class TestWriter(dspy.Signature):
    """You are a careful QA engineer. Write test cases for the function the problem describes.

    Write only assert statements of the form `assert function_name(arguments) == expected`, one
    per line, with literal expected values (numbers, strings, lists, tuples, dicts, booleans,
    None). Work out each expected value from the problem statement by hand. Cover the examples
    the statement gives, typical inputs and edge cases (empty inputs, zero, negative numbers,
    single elements). Do not implement the function and do not import anything."""

    __test__ = False  # a DSPy signature, not a pytest test class

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    n_tests: int = dspy.InputField(desc="How many assert statements to write.")
    test_code: str = dspy.OutputField(
        desc="The assert statements, one per line, as plain code."
    )
