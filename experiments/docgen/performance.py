"""The performance page, rendered from the measurements kept as data (``docs/data/timings.csv``):
the latest figure of each measure with its date and machine, then every measurement."""

from __future__ import annotations

import ast
import csv
from pathlib import Path

from critiquelab.core.errors import UserError
from critiquelab.experiments.docgen.markdown import cell, code, generated_note, table

COLUMNS = ("measure", "date", "value", "unit", "machine", "source", "note")


def read_timings(path: Path) -> list[dict[str, str]]:
    """The rows of ``path``; a missing column or an undated or valueless row is refused (a figure
    without its date and source is not to be published)."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise UserError(f"{path}: missing column(s) {', '.join(missing)}")
        rows = list(reader)
    for number, row in enumerate(rows, start=2):
        empty = [column for column in ("measure", "date", "value", "unit", "source") if not row[column]]
        if empty:
            raise UserError(f"{path}:{number}: empty {', '.join(empty)}")
    return rows


def _row(row: dict[str, str], *, with_measure: bool) -> list[str]:
    figure = [cell(f"{row['value']} {row['unit']}"), row["date"], cell(row["machine"]),
              code(row["source"]), cell(row["note"])]
    return [cell(row["measure"]), *figure] if with_measure else figure


def benchmarks_section(folder: Path) -> str:
    """Each script in ``folder`` with the first paragraph of its docstring (what it measures)."""
    lines = []
    for script in sorted(folder.glob("*.py")):
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        lines.append(f"- `{script.name}` — {cell(doc.split(chr(10) * 2)[0])}")
    return "\n".join(lines) + "\n"


def performance_page(path: Path, benchmarks: Path | None = None) -> str:
    rows = read_timings(path)
    # The latest of each measure; on one day, the last row written that day.
    latest: dict[str, dict[str, str]] = {}
    for row in rows:
        if row["measure"] not in latest or row["date"] >= latest[row["measure"]]["date"]:
            latest[row["measure"]] = row
    history = sorted(rows, key=lambda row: (row["measure"], row["date"]))
    header = ["value", "date", "machine", "command", "note"]
    return "\n".join([
        "# Performance\n",
        generated_note(f"`{path.as_posix()}`: add a row there when you measure"),
        "Wall times on a shared machine vary by 2-3x from day to day with what else runs on it; "
        "compare figures measured on the same day and machine.\n",
        "## Current\n",
        table(["measure", *header], [_row(row, with_measure=True) for row in latest.values()]),
        "## History\n",
        table(["measure", *header], [_row(row, with_measure=True) for row in history]),
        *(["## Benchmarks\n",
           f"Run by hand (`.venv/bin/python {benchmarks.name}/NAME.py --help`); they print their figures.\n",
           benchmarks_section(benchmarks)] if benchmarks is not None else []),
    ])
