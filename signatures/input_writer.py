"""The input-writer role: new inputs for the function, written from the problem statement alone
and without expected outputs (S*'s distinguishing inputs: the candidates' own outputs on them
are compared, so no value has to be worked out by hand)."""

from __future__ import annotations

import dspy


class InputWriter(dspy.Signature):
    """You are a careful tester. Write new inputs for the function the problem describes: inputs
    on which a correct implementation and a subtly wrong one would return different results.

    Write each input as one call of the function with literal arguments (numbers, strings, lists,
    tuples, dicts, booleans, None), for example `function_name([1, 2, 3], 2)`, with as many
    arguments as the function takes. Cover edge cases (empty inputs, zero, negative numbers,
    single elements, duplicates, ties, boundaries) and cases the examples in the statement do not
    show. Do not write expected outputs, do not implement the function and do not import anything."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    n_inputs: int = dspy.InputField(desc="How many inputs to write.")
    inputs: list[str] = dspy.OutputField(
        desc="The calls, one per item, each like function_name(arguments)."
    )
