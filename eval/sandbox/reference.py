"""Differential checking on the trusted side (EvalPlus-style hidden tests).

An EvalPlus problem's hidden test is a list of inputs whose expected outputs are whatever the
dataset's canonical solution returns. Those outputs are computed here, in the trusted checker
process, while the hidden test module loads — before the candidate is even started — from
dataset text only; the candidate, in its sandbox, receives copies of the inputs and hands back
plain data, so it can neither see nor influence what it is compared with.

Comparison follows EvalPlus: equal, or — when the dataset gives a tolerance ``atol``, or the
expected value is a float (or a list/tuple of floats), in which case ``atol`` is at least 1e-6 —
the same type (and length) and every number within ``atol + 1e-7 * |expected|``, NaN never
close (``numpy.allclose`` with its default ``rtol``).

Standard library only: the checker imports this while it loads a hidden test.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

_RTOL = 1e-7
_FLOAT_ATOL = 1e-6


class ReferenceFailed(RuntimeError):
    """The dataset's canonical solution could not produce an expected output (a dataset bug)."""


def reference_outputs(source: str, entry_point: str, inputs: Sequence[Sequence[Any]]) -> list[Any]:
    """Run ``entry_point`` from ``source`` (the prompt + canonical solution) on a fresh deep copy
    of each argument list. Messages name the input by position only: hidden inputs must not end
    up in a verdict an optimiser may show to a model."""
    namespace: dict[str, Any] = {"__name__": "__critiquelab_reference__"}
    try:
        exec(compile(source, "<reference>", "exec"), namespace)
    except Exception as exc:
        raise ReferenceFailed(f"the reference solution does not load: {type(exc).__name__}") from None
    function = namespace.get(entry_point)
    if not callable(function):
        raise ReferenceFailed(f"the reference solution defines no '{entry_point}'")
    outputs = []
    for index, args in enumerate(inputs, start=1):
        try:
            outputs.append(function(*copy.deepcopy(list(args))))
        except Exception as exc:
            raise ReferenceFailed(
                f"the reference solution raised {type(exc).__name__} on hidden input {index}"
            ) from None
    return outputs


def _is_floats(value: Any) -> bool:
    if isinstance(value, float):
        return True
    return isinstance(value, list | tuple) and all(isinstance(item, float) for item in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _close(actual: Any, expected: Any, atol: float) -> bool:
    if _is_number(actual) and _is_number(expected):
        close: bool = abs(actual - expected) <= atol + _RTOL * abs(expected)  # NaN compares False
        return close
    if isinstance(actual, list | tuple) and isinstance(expected, list | tuple):
        return len(actual) == len(expected) and all(
            _close(a, e, atol) for a, e in zip(actual, expected, strict=True)
        )
    return False


def same_output(actual: Any, expected: Any, atol: float) -> bool:
    """Whether the candidate's output matches the reference's (see the module docstring)."""
    if actual == expected:
        return True
    if atol == 0 and _is_floats(expected):
        atol = _FLOAT_ATOL
    if atol == 0 or type(actual) is not type(expected):
        return False
    if isinstance(expected, list | tuple) and len(actual) != len(expected):
        return False
    return _close(actual, expected, atol)
