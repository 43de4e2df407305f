"""How another library's error becomes part of a one-line report."""

from critiquelab.core.errors import error_line


def test_the_first_line_is_kept_whole_when_it_fits():
    assert error_line(ValueError("bad value\nsecond line")) == "bad value"
    assert error_line(ValueError("first\nthe cause"), last=True) == "the cause"
    assert error_line(ValueError("")) == "ValueError"


def test_a_long_line_is_cut_at_a_word_and_says_it_was_cut():
    text = "the reply was not JSON; a proxy's error page is the usual cause; " * 10
    line = error_line(RuntimeError(text), limit=100)
    assert len(line) <= 100 and line.endswith("…")
    assert text.startswith(line[:-1]) and text[len(line) - 1] == " "  # ends where a word ended


def test_a_line_without_spaces_is_cut_at_the_limit():
    line = error_line(RuntimeError("x" * 500), limit=50)
    assert line == "x" * 49 + "…"
