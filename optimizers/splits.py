"""A fixed, seeded train/validation/test split of problem ids.

Why fixed and seeded: an optimised program is only evidence of anything when it is scored on
problems it never saw while being optimised. The split is a pure function of the problem ids
and the seed (ids are sorted first, so dataset order does not matter), logged with every
optimisation, and :meth:`Split.check_scoring` refuses to score on train/validation problems
unless the caller explicitly allows the overlap. A split with an empty part is refused when it
is made: without train problems nothing is optimised, without validation problems the gate has
nothing to compare, without test problems nothing judges the result.

The test part is either the rest of the problems train and validation leave (``test: rest``) or
a set given apart (``test: test_half``: the held-out protocol's test half of the dataset, while
train and validation come from its dev half — HumanEval's 82 odd-numbered problems judge, so
a small effect has a chance to show, and no problem chosen on is ever scored). Given apart it may
overlap train/validation (train drawn from ``dataset.split: all``): :meth:`Split.check_scoring`
then refuses it like any other overlap.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from critiquelab.core.config import StrictModel
from critiquelab.core.errors import UserError
from critiquelab.core.yaml_numbers import number_as_text_hint


class SplitOverlapError(UserError):
    """Scoring an optimised program on problems it was trained or validated on."""


def _written(value: Any) -> str:
    """A value as a YAML spec writes it (strings quoted, so '0.5' reads as text)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else repr(value)


def _amount(value: Any) -> Any:
    """A part's size, unambiguous: a count is a whole number ≥ 1 (``3``), a fraction a number
    strictly between 0 and 1 (``0.25``). ``1.5``, ``3.0``, ``0``, ``true`` or ``"0.25"`` is neither
    (``1.5`` was once truncated to a count of 1)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError(
            "split_amount", "expected a count (a whole number, at least 1) or a fraction between 0 "
            "and 1, got {got}{hint}", {"got": _written(value), "hint": number_as_text_hint(value)})
    if isinstance(value, int) and value < 1:
        raise PydanticCustomError(
            "split_amount", "a count must be at least 1 (got {got}); a fraction is a number between 0 "
            "and 1", {"got": _written(value)})
    if isinstance(value, float) and not 0 < value < 1:
        raise PydanticCustomError(
            "split_amount", "a fraction must be between 0 and 1, exclusive (got {got}); a count is a "
            "whole number such as 3", {"got": _written(value)})
    return value


PartSize = Annotated[int | float, BeforeValidator(_amount)]
TestSource = Literal["rest", "test_half"]


class SplitSpec(StrictModel):
    """How to split: fractions (or counts, when ≥ 1) of train and validation; the rest is test.
    Strict like the rest of a spec: values are taken as written, never converted."""

    # The range of every seed a spec holds (critiquelab.experiments.spec.experiment.MAX_SEED, which this layer
    # cannot import).
    seed: int = Field(default=0, ge=0, le=2**31 - 1,
                      description="Seed of the shuffle; the split is a function of it.")
    train: PartSize = Field(
        default=0.5, description="A fraction (a number between 0 and 1, e.g. 0.5) or a count (a whole "
        "number ≥ 1, e.g. 20) of the problems for train.")
    val: PartSize = Field(
        default=0.25, description="A fraction (between 0 and 1) or a count (a whole number ≥ 1) of the "
        "problems for validation.")
    test: TestSource = Field(
        default="rest", description="Where the held-out test problems come from. 'rest': the problems "
        "train and val leave. 'test_half': the dataset's held-out test half (the odd positions, "
        "critiquelab.eval.held_out; dataset.task_ids and limit select within it as within the other half), "
        "while train and val are drawn from dataset.split — 'dev', or the test would overlap them "
        "(refused unless allow_overlap); the dev problems they leave are not used.")
    allow_overlap: bool = Field(
        default=False, description="Allow scoring on train/validation problems (reported as such)."
    )

    @model_validator(mode="after")
    def _fractions_fit(self) -> SplitSpec:
        if isinstance(self.train, float) and isinstance(self.val, float) and self.train + self.val >= 1:
            raise PydanticCustomError(
                "split_fractions", "train + val fractions must be below 1, so that the test part keeps "
                "problems (got {train} + {val})", {"train": self.train, "val": self.val})
        return self


@dataclass(frozen=True)
class Split:
    """Disjoint train/val/test problem ids."""

    seed: int
    train: tuple[str, ...]
    val: tuple[str, ...]
    test: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"seed": self.seed, "train": list(self.train), "val": list(self.val), "test": list(self.test)}

    @property
    def fingerprint(self) -> str:
        """Short hash of the split, for MLflow params and checkpoint keys."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()[:12]

    def check_scoring(self, task_ids: Iterable[str], *, allow_overlap: bool = False) -> None:
        """Raise :class:`SplitOverlapError` if any of ``task_ids`` is a train or validation problem."""
        seen = set(self.train) | set(self.val)
        overlap = sorted(set(task_ids) & seen)
        if overlap and not allow_overlap:
            shown = ", ".join(overlap[:5]) + (" …" if len(overlap) > 5 else "")
            raise SplitOverlapError(
                f"{len(overlap)} problem(s) to score were used to optimise the program ({shown}); "
                "score on the test split, or set allow_overlap: true"
            )


def _count(amount: float, total: int) -> int:
    """A count as it is, a fraction of ``total`` rounded."""
    return min(total, amount if isinstance(amount, int) else round(amount * total))


def make_split(
    task_ids: Iterable[str], spec: SplitSpec | None = None, *, test_ids: Iterable[str] | None = None
) -> Split:
    """Split ``task_ids`` by ``spec``. Same ids and seed ⇒ same split, whatever their order.
    With ``test_ids`` (``test: test_half``) those, in the order given, are the test part and
    train/validation are drawn from ``task_ids`` alone; else the test part is what they leave.
    Raises :class:`UserError` (with the sizes it would produce) if a part would be empty."""
    spec = spec or SplitSpec()
    ids = sorted(set(task_ids))
    random.Random(spec.seed).shuffle(ids)
    n_train = _count(spec.train, len(ids))
    n_val = min(_count(spec.val, len(ids)), len(ids) - n_train)
    test = tuple(dict.fromkeys(test_ids)) if test_ids is not None else tuple(ids[n_train + n_val:])
    sizes = {"train": n_train, "validation": n_val, "test": len(test)}
    empty = [part for part, size in sizes.items() if size == 0]
    if empty:
        source = " (the test half)" if test_ids is not None else ""
        raise UserError(
            f"split: {len(ids)} problems with train={spec.train:g}, val={spec.val:g} give "
            f"{'/'.join(str(n) for n in sizes.values())} train/validation/test{source} problems; "
            f"{' and '.join(empty)} would be empty (every part needs at least one problem)"
        )
    return Split(spec.seed, tuple(ids[:n_train]), tuple(ids[n_train:n_train + n_val]), test)
