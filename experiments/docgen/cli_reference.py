"""The CLI reference, read from the argparse parser the ``critiquelab`` command itself uses, so
every verb and option (a plugin's or a new one's too) is listed as the command accepts it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from critiquelab.experiments.docgen.markdown import cell, code, generated_note, table

# Accepted before the verb and after it: listed once, not under every verb.
_COMMON = ("home", "debug")


def _verbs(parser: argparse.ArgumentParser, prog: str) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(command, its one-line help, its parser) for every verb and sub-verb, depth first, in the
    order they were added."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            if name not in helps:  # an alias: listed under its verb's own name
                continue
            command = f"{prog} {name}"
            yield command, helps[name], sub
            yield from _verbs(sub, command)


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:  # as argparse expands it in --help
        text = text % {**vars(action), "prog": prog}
    return text


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " \\| ".join(code(choice) for choice in action.choices)
    name = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    many = {"+": " …", "*": " …", "?": " (optional)"}.get(str(action.nargs), "")
    return code(name) + many


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    default = action.default
    if default in (None, False, argparse.SUPPRESS) or action.nargs in ("+", "*"):
        return ""
    if isinstance(default, list):
        default = ",".join(map(str, default))
    return code(default)


def _arguments(parser: argparse.ArgumentParser, prog: str, skip: tuple[str, ...]) -> str:
    rows = [
        [", ".join(map(code, action.option_strings)) or code(action.dest), _value(action), _default(action),
         cell(_help(action, prog))]
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and action.dest not in skip
    ]
    return table(["argument", "value", "default", "description"], rows) if rows else ""


def cli_page(parser: argparse.ArgumentParser) -> str:
    """The page: options every verb takes, then a section per verb with its usage and arguments."""
    prog = parser.prog
    parts = [
        "# CLI reference\n",
        generated_note("`critiquelab.experiments.cli.parser.build_parser()`, the parser `critiquelab` runs"),
        f"{cell(parser.description or '')}\n",
        f"Every verb also takes these, before or after the verb:\n\n"
        f"{_arguments(parser, prog, tuple(a.dest for a in parser._actions if a.dest not in _COMMON))}",
        "Exit codes: [Exit codes](exit-codes.md).\n",
    ]
    for command, summary, sub in _verbs(parser, prog):
        usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
        parts.append(f"## `{command}`\n\n{cell(summary)}\n\n```text\n{usage}\n```\n")
        parts.append(_arguments(sub, command, _COMMON))
    return "\n".join(parts)
