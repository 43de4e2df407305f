"""Dataset formats: how the rows of a benchmark file become validated :class:`Problem`s.

- ``humaneval``: rows already are problems (``task_id, prompt, entry_point, test``).
- ``mbpp``: ``text, code, test_list`` … — prompt, entry point and ``check`` are built.
- ``evalplus``: HumanEval+ / MBPP+ — inputs checked against the canonical solution's outputs.

Formats are found through the entry-point group ``critiquelab.formats`` (:data:`ENTRY_POINTS`):
critiquelab's pyproject lists these three there, and an installed package adds its own with a
line ``NAME = "its_module:ITS_FORMAT"`` (a :class:`DatasetFormat` whose ``name`` is ``NAME``).
A spec names its format (``dataset.format``) or leaves it to :func:`detect_format`, which looks
only at the column names (and so only ever picks one of the three).
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from critiquelab.core.errors import UserError
from critiquelab.core.plugins import entry_point_objects
from critiquelab.eval.formats.base import DatasetFormat, FormatOptions

ENTRY_POINTS = "critiquelab.formats"

__all__ = ["ENTRY_POINTS", "DatasetFormat", "FormatName", "FormatOptions", "detect_format", "format_names",
           "get_format", "rescan"]


@functools.cache
def _formats() -> dict[str, DatasetFormat]:
    """Every installed format, loaded on first use and kept for the process; an entry point
    that fails to import, is no format, is named otherwise than its format, or takes a name
    another has, is one UserError line."""
    found: dict[str, tuple[DatasetFormat, str]] = {}
    for loaded in entry_point_objects(ENTRY_POINTS):
        value = loaded.value
        if not isinstance(value, DatasetFormat):
            raise UserError(f"{loaded.source}: not a dataset format "
                            "(a critiquelab.eval.formats.DatasetFormat)")
        if value.name != loaded.name:
            raise UserError(f"{loaded.source}: is format '{value.name}'; name the entry point '{value.name}'")
        if value.name in found and found[value.name][0] is not value:
            raise UserError(f"dataset format '{value.name}' is registered twice: by {found[value.name][1]} "
                            f"and by {loaded.source}; uninstall or rename one")
        found[value.name] = (value, loaded.source)
    if "humaneval" not in found:
        raise UserError(f"critiquelab's dataset formats are not installed (no entry points of group "
                        f"{ENTRY_POINTS}): reinstall it, e.g. pip install -e .")
    return {name: value for name, (value, _) in found.items()}


def rescan() -> None:
    """Look for installed formats again on the next use (after installing a plugin in a
    running process)."""
    _formats.cache_clear()


def format_names() -> list[str]:
    """The installed formats' names."""
    return list(_formats())


def get_format(name: str) -> DatasetFormat:
    formats = _formats()
    if name not in formats:
        raise UserError(f"unknown dataset format '{name}'; known: {', '.join(formats)}")
    return formats[name]


def _installed_format(name: str) -> str:
    try:
        get_format(name)
    except UserError as exc:
        raise PydanticCustomError("dataset_format", "{message}", {"message": str(exc)}) from exc
    return name


# A format's name as a spec or an option gives it: checked against the installed formats.
FormatName = Annotated[str, AfterValidator(_installed_format)]


def detect_format(columns: Collection[str]) -> tuple[str, str]:
    """``(format name, why)`` from the column names alone: EvalPlus inputs mean ``evalplus``,
    an assert list means ``mbpp``, anything else is read as ``humaneval``."""
    plus = [c for c in ("base_input", "plus_input") if c in columns]
    if plus:
        return "evalplus", f"it has {' and '.join(plus)}"
    if "test_list" in columns:
        return "mbpp", "it has test_list"
    return "humaneval", "it has no base_input, plus_input or test_list"
