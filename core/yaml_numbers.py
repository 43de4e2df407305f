"""Numbers a YAML spec holds as text, and how to write them as numbers.

PyYAML reads YAML 1.1, in which an exponent needs a decimal point and a sign (``1.0e+3``):
``1e3``, ``5e-1`` and ``1.0e308`` are strings. Strict spec fields refuse text where a number
belongs, so the message says what to write.
"""

from __future__ import annotations

import math

import yaml

NUMBER_TYPE_ERRORS = frozenset({"int_type", "float_type"})
"""pydantic's error types for a value that is not the number a strict field wants."""


def number_as_text_hint(value: object) -> str:
    """For ``value`` refused where a number was expected: " (how to write it)" when it is a number
    held as text, to append to the message; "" otherwise."""
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    if _as_yaml(value) is not None:  # YAML reads it as a number: it was quoted
        return " (a number in quotes is text: leave the quotes out)"
    return f" (YAML reads {value} as text: write {_yaml_float(number)})"


def _as_yaml(text: str) -> float | int | None:
    """What YAML reads ``text`` as, unquoted, when that is a number."""
    try:
        read = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return read if isinstance(read, int | float) and not isinstance(read, bool) else None


def _yaml_float(number: float) -> str:
    """``number`` written so YAML 1.1 reads it as one: an exponent with a point and a sign."""
    text = f"{number:.10g}"
    mantissa, exponent_mark, exponent = text.partition("e")
    if not exponent_mark:
        return text
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent}"
