"""Inputs made from the prompt's own examples by type-aware mutation (EvalPlus, arXiv 2305.01210),
with no model call: each visible example's call has one argument changed at a time — a number
to 0, ±1 from it, its negation or its double; a string emptied, reversed, upper-cased, doubled or
cut to its first character; a list or tuple emptied, cut to its first item, reversed, sorted or
given its first item again; a boolean flipped; a dict emptied.

Like a writer's inputs they carry no expected value: candidates are told apart by their own
outputs. Some fall outside what the function is meant to take (a negative count, an empty list
the docstring rules out); every candidate then runs on them alike, so they only add groups where
candidates behave differently there. Deterministic: the same prompt gives the same inputs.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from critiquelab.eval import python_ast


def _variants(value: Any) -> list[Any]:
    """Values one mutation away from ``value``, by its type."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [0, value + 1, value - 1, -value, 2 * value]
    if isinstance(value, float):
        return [0.0, value + 1.0, -value, value / 2, 2 * value]
    if isinstance(value, str):
        return ["", value[::-1], value.upper(), value + value, value[:1]]
    if isinstance(value, list | tuple):
        kind = type(value)
        items = list(value)
        variants = [[], items[:1], items[::-1], items + items[:1]]
        with contextlib.suppress(TypeError):  # items of mixed types have no order
            variants.append(sorted(items))
        return [kind(v) for v in variants]
    if isinstance(value, dict):
        return [{}]
    return []


def _call_values(args: str) -> tuple[list[Any], dict[str, Any]] | None:
    """The literal positional and keyword arguments of ``f(args)``; None when any is no literal."""
    try:
        call = python_ast.parse(f"f({args})", mode="eval").body
        if not isinstance(call, ast.Call):  # e.g. "1), g(2" closes the call early
            return None
        positional = [python_ast.literal_eval(ast.unparse(a)) for a in call.args]
        keywords = {str(k.arg): python_ast.literal_eval(ast.unparse(k.value)) for k in call.keywords}
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return positional, keywords


def _source(positional: Sequence[Any], keywords: dict[str, Any]) -> str:
    return ", ".join([repr(v) for v in positional] + [f"{k}={v!r}" for k, v in keywords.items()])


def _mutations(args: str) -> Iterator[str]:
    """Argument sources of ``args`` with one argument changed, argument by argument."""
    values = _call_values(args)
    if values is None:
        return
    positional, keywords = values
    per_argument: list[list[str]] = []
    for index, value in enumerate(positional):
        per_argument.append([_source([*positional[:index], v, *positional[index + 1:]], keywords)
                             for v in _variants(value)])
    for name, value in keywords.items():
        per_argument.append([_source(positional, {**keywords, name: v}) for v in _variants(value)])
    # Round robin over the arguments, so a small limit still changes each of them.
    for round_ in range(max((len(v) for v in per_argument), default=0)):
        for variants in per_argument:
            if round_ < len(variants):
                yield variants[round_]


def mutated_calls(example_args: Sequence[str], entry_point: str, limit: int) -> list[str]:
    """Up to ``limit`` calls ``entry_point(...)``, mutations of the examples' arguments taken in
    turn from each example; none repeats another or an example."""
    seen = set(example_args)
    streams = [_mutations(args) for args in example_args]
    calls: list[str] = []
    while streams and len(calls) < limit:
        for stream in list(streams):
            found = next(stream, None)
            if found is None:
                streams.remove(stream)
            elif found not in seen and len(calls) < limit:
                seen.add(found)
                calls.append(f"{entry_point}({found})")
    return calls
