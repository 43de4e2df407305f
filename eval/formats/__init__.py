"""Dataset formats: how the rows of a benchmark file become validated :class:`Problem`s.

- ``humaneval``: rows already are problems (``task_id, prompt, entry_point, test``).
- ``mbpp``: ``text, code, test_list`` … — prompt, entry point and ``check`` are built.
- ``evalplus``: HumanEval+ / MBPP+ — inputs checked against the canonical solution's outputs.

A spec names its format (``dataset.format``) or leaves it to :func:`detect_format`, which looks
only at the column names.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from core.errors import UserError
from eval.formats import evalplus, humaneval, mbpp
from eval.formats.base import DatasetFormat, FormatOptions

FormatName = Literal["humaneval", "mbpp", "evalplus"]
FORMATS: dict[str, DatasetFormat] = {f.name: f for f in (humaneval.FORMAT, mbpp.FORMAT, evalplus.FORMAT)}

__all__ = ["FORMATS", "DatasetFormat", "FormatName", "FormatOptions", "detect_format", "get_format"]


def get_format(name: str) -> DatasetFormat:
    if name not in FORMATS:
        raise UserError(f"unknown dataset format '{name}'; known: {', '.join(FORMATS)}")
    return FORMATS[name]


def detect_format(columns: Collection[str]) -> tuple[str, str]:
    """``(format name, why)`` from the column names alone: EvalPlus inputs mean ``evalplus``,
    an assert list means ``mbpp``, anything else is read as ``humaneval``."""
    plus = [c for c in ("base_input", "plus_input") if c in columns]
    if plus:
        return "evalplus", f"it has {' and '.join(plus)}"
    if "test_list" in columns:
        return "mbpp", "it has test_list"
    return "humaneval", "it has no base_input, plus_input or test_list"
