"""Numbers a YAML spec holds as text are named with how to write them."""

import pytest
import yaml

from critiquelab.core.yaml_numbers import number_as_text_hint


@pytest.mark.parametrize(("value", "hint"), [
    ("1e3", " (YAML reads 1e3 as text: write 1000)"),
    ("5e-1", " (YAML reads 5e-1 as text: write 0.5)"),
    ("-2E+2", " (YAML reads -2E+2 as text: write -200)"),
    ("0.5", " (a number in quotes is text: leave the quotes out)"),
    ("1.0e+3", " (a number in quotes is text: leave the quotes out)"),
    # a point but no sign: text too, and the way to write it must itself read as a number
    ("1.0e308", " (YAML reads 1.0e308 as text: write 1.0e+308)"),
    ("2.5E-20", " (a number in quotes is text: leave the quotes out)"),
    ("three", ""), ("nan", ""), ("", ""), (3, ""), (None, ""),
])
def test_hint(value, hint):
    assert number_as_text_hint(value) == hint
    if "write " in hint:  # what it says to write is read by YAML as that number
        written = hint.split("write ")[1].rstrip(")")
        assert yaml.safe_load(written) == float(value)
