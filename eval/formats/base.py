"""What a dataset format is: the fields it reads and how a row becomes a :class:`Problem`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from critiquelab.eval.formats.rows import RowReader
from critiquelab.eval.problems import Problem


@dataclass(frozen=True)
class FormatOptions:
    """Format-specific choices from the spec's ``dataset`` section."""

    challenge_tests: bool = False  # mbpp: add challenge_test_list to the hidden test


@dataclass(frozen=True)
class DatasetFormat:
    """``required`` fields must be columns of the dataset (possibly renamed with
    ``dataset.fields``); ``optional`` ones may be. ``build`` validates one row and returns its
    problem, or raises a one-line UserError naming the row and field."""

    name: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    build: Callable[[RowReader, FormatOptions], Problem]

    @property
    def fields(self) -> tuple[str, ...]:
        return (*self.required, *self.optional)
