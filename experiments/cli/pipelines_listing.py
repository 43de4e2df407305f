"""``critiquelab pipelines``: each registered pipeline's params as a table, roles and figures,
fitted to the terminal — the description column wraps under itself instead of the terminal
wrapping whole rows."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

_MIN_DESCRIPTION = 30  # narrower than this, the description goes on lines of its own


def render_pipelines(pipelines: Sequence[dict[str, Any]], width: int) -> str:
    """The listing of :func:`critiquelab.pipelines.registry.describe_pipelines`, at most ``width`` wide where
    the columns before the description allow it."""
    blocks = []
    for pipeline in pipelines:
        lines = textwrap.wrap(f"{pipeline['name']}: {pipeline['summary']}", width, subsequent_indent="  ")
        rows = [
            [p["name"], p["type"], "(required)" if p["required"] else spec_value(p["default"]),
             p["allowed"] or "-", p["description"]]
            for p in pipeline["params"]
        ]
        header = ["param", "type", "default", "allowed", "description"]
        lines += table(header, rows, width) if rows else ["  no params"]
        for label, names in (("roles", role_names(pipeline)), ("figures", pipeline["figures"])):
            if names:
                lines += textwrap.wrap(f"{label}: {', '.join(names)}", width,
                                       initial_indent="  ", subsequent_indent="    ")
        blocks.append("\n".join(lines))
    closing = ("Set them under a pipeline's `params:` in an experiment spec; a role's own model or "
               "temperature under its `roles:`. The figures are each problem's, in problems.parquet "
               "(extra.*) and summarised in the run's metrics.")
    return "\n\n".join([*blocks, textwrap.fill(closing, width)])


def role_names(pipeline: dict[str, Any]) -> list[str]:
    """Each role, with the predictors serving it where they are named otherwise (``coder
    (proposer)``): the names `export` and `run --prompts` use, and the attributes behind them."""
    served = pipeline.get("predictors", {})
    return [role if served.get(role, [role]) == [role]
            else f"{role} ({', '.join(served[role]) or 'no predictor'})" for role in pipeline["roles"]]


def table(header: list[str], rows: list[list[str]], width: int) -> list[str]:
    """Left-aligned columns; the last one wrapped to what ``width`` leaves of it (when that is too
    little, each row's allowed values and description go on indented lines of their own)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lead = 2 + sum(w + 2 for w in widths)
    room = width - lead
    lines = []
    for row in [header, *rows]:
        cells = "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
        if room >= _MIN_DESCRIPTION:
            wrapped = textwrap.wrap(row[-1], room) or [""]
            lines.append(f"{cells}  {wrapped[0]}".rstrip())
            lines += [" " * lead + more for more in wrapped[1:]]
        else:  # too narrow for a description column: name, type and default, then the rest below
            first = "  " + "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=False))
            lines.append(first.rstrip())
            if row is not header:
                for text in (f"allowed: {row[3]}", row[-1]):
                    lines += textwrap.wrap(text, max(width - 6, 20), initial_indent="      ",
                                           subsequent_indent="      ")
    return lines


def spec_value(value: Any) -> str:
    """How a default is written in a YAML spec."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)
