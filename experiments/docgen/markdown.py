"""Markdown the reference pages share: a table whose cells stay one line and render as written."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# Text from docstrings and help strings is prose, not markup: these would start HTML, emphasis or a
# cross-reference (`<data dir>`, `2**32-1`, `[a-z]`) or end a table cell.
_ESCAPES = str.maketrans({"|": r"\|", "<": "&lt;", ">": "&gt;", "*": r"\*", "[": r"\["})


def cell(text: object) -> str:
    """``text`` as one table cell: one line, markup characters shown as themselves, except code
    spans (between backticks), which Markdown already shows verbatim."""
    parts = " ".join(str(text).split()).split("`")
    # Even parts are prose, odd parts code spans; inside a span only the cell's own `|` needs escaping.
    return "`".join(part.translate(_ESCAPES) if i % 2 == 0 else part.replace("|", r"\|")
                    for i, part in enumerate(parts))


def code(text: object) -> str:
    """``text`` as a code span in a table cell ('' for nothing)."""
    value = str(text)
    if not value:
        return ""
    fence = "``" if "`" in value else "`"
    escaped = value.replace("|", r"\|")
    return f"{fence}{escaped}{fence}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; cells are taken as given (pass them through :func:`cell` or :func:`code`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def generated_note(source: str) -> str:
    """The line each generated page opens with, naming what it is generated from."""
    return (f"!!! note \"Generated\"\n    This page is generated at build time from {source}; "
            "edit that, not this page.\n")
