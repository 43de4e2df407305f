"""Numbers a YAML spec holds as text are named with how to write them."""

import pytest

from core.yaml_numbers import number_as_text_hint


@pytest.mark.parametrize(("value", "hint"), [
    ("1e3", " (YAML reads 1e3 as text: write 1000)"),
    ("5e-1", " (YAML reads 5e-1 as text: write 0.5)"),
    ("-2E+2", " (YAML reads -2E+2 as text: write -200)"),
    ("0.5", " (a number in quotes is text: leave the quotes out)"),
    ("three", ""), ("nan", ""), ("", ""), (3, ""), (None, ""),
])
def test_hint(value, hint):
    assert number_as_text_hint(value) == hint
