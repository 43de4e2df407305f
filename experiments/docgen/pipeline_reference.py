"""The pipeline reference, read from the registry (built-in pipelines and plugins alike), and the
exit codes, read from their one definition (:class:`critiquelab.core.errors.ExitCode`)."""

from __future__ import annotations

import json
from typing import Any

from critiquelab.core.errors import EXIT_MEANINGS
from critiquelab.experiments.docgen.markdown import cell, code, generated_note, table


def _default(param: dict[str, Any]) -> str:
    if param["required"]:
        return "required"
    value = param["default"]
    if value == "":
        return '`""`'
    return code(value if isinstance(value, str) else json.dumps(value, default=str))


def _pipeline(entry: dict[str, Any]) -> str:
    rows = [[code(p["name"]), cell(p["type"]), _default(p), cell(p["allowed"]), cell(p["description"])]
            for p in entry["params"]]
    roles = ", ".join(code(role) for role in entry["roles"]) or "none"
    figures = ", ".join(code(figure) for figure in entry["figures"]) or "none"
    params = table(["param", "type", "default", "allowed", "description"], rows) if rows else "No params.\n"
    return (f"## `{entry['name']}`\n\n{cell(entry['summary'])}\n\n"
            f"**Roles** (configurable under `roles:`): {roles}.  \n"
            f"**Per-problem figures** (its outcome): {figures}.\n\n{params}")


def pipelines_page(entries: list[dict[str, Any]]) -> str:
    """A section per registered pipeline: summary, roles, figures, params."""
    names = ", ".join(f"[`{e['name']}`](#{e['name']})" for e in entries)
    return "\n".join([
        "# Pipeline reference\n",
        generated_note("the pipeline registry (`critiquelab.pipelines.registry.describe_pipelines()`, what "
                       "`critiquelab pipelines` prints), plugins included"),
        "A spec names a pipeline and sets its `params`; every param is typed and checked when the spec "
        "is read. To add one, see [Your own pipeline](../guides/own-pipeline.md).\n",
        f"{len(entries)} pipelines: {names}.\n",
        *(_pipeline(entry) for entry in entries),
    ])


def exit_codes_page() -> str:
    rows = [[code(int(exit_code)), cell(meaning)] for exit_code, meaning in EXIT_MEANINGS.items()]
    return "\n".join([
        "# Exit codes\n",
        generated_note("`critiquelab.core.errors.ExitCode` and `EXIT_MEANINGS`, the codes the CLI returns"),
        table(["code", "meaning"], rows),
        "`critiquelab --debug …` shows the traceback above the one line, with the same exit code; any "
        "other traceback is a bug. Every model request has a timeout (`model.timeout_s` or "
        "`--request-timeout`; default 600 s for the bundled models, 120 s for other endpoints).\n",
    ])
