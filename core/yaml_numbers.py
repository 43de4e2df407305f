"""Numbers a YAML spec holds as text, and how to write them as numbers.

PyYAML reads YAML 1.1, in which ``1e3`` and ``5e-1`` (an exponent without a decimal point) are
strings; strict spec fields refuse text where a number belongs, so the message says what to write.
"""

from __future__ import annotations

import math
import re

_EXPONENT_WITHOUT_POINT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")
NUMBER_TYPE_ERRORS = frozenset({"int_type", "float_type"})
"""pydantic's error types for a value that is not the number a strict field wants."""


def number_as_text_hint(value: object) -> str:
    """For ``value`` refused where a number was expected: " (how to write it)" when it is a number
    held as text, to append to the message; "" otherwise."""
    if not isinstance(value, str):
        return ""
    if _EXPONENT_WITHOUT_POINT.fullmatch(value):
        return f" (YAML reads {value} as text: write {float(value):.10g})"
    try:
        number = float(value)
    except ValueError:
        return ""
    return " (a number in quotes is text: leave the quotes out)" if math.isfinite(number) else ""
