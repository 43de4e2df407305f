"""The stored result schema's version, and the one migration that reads every older version.

What the runner stores per problem — a checkpoint line, a trace's result attribute, a row of the
per-problem table (``problems.parquet``) — carries ``schema_version``. Every reader goes through
:func:`upgrade_record` (a record: :class:`critiquelab.eval.results.ProblemResult` runs it before validating)
or :func:`upgrade_table` (a whole table, read as columns), so each older shape is handled here
once, as a step from one version to the next, never by a reader of its own.

Versions:

1. Unversioned: everything written before the version was stored. Older code kept the sandbox's
   isolation level among the figures (``extra.isolation``, a table's ``extra.isolation`` column),
   older still recorded none; a table may lack other columns added later (their fields' defaults
   apply when its rows are read).
2. ``schema_version`` stored; ``isolation`` in its own field and column.

To change the schema: raise :data:`RESULT_SCHEMA`, add the step from the previous version to
:func:`_record_step` (and to :func:`_table_step` if a table's columns change), say what changed
above, and keep a record of the previous version as a test fixture (``tests/eval/data``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from critiquelab.core.errors import UserError

RESULT_SCHEMA = 2
# The version of a record or table that stores none: written before versions were stored.
UNVERSIONED = 1
# Fields that version 1 could hold among the figures in ``extra``.
_MOVED_OUT_OF_EXTRA = ("isolation",)


def stored_version(value: object) -> int:
    """The schema version a record holds (absent: :data:`UNVERSIONED`); a version newer than this
    code reads is refused, never guessed at."""
    version = UNVERSIONED if value is None else value
    if isinstance(version, float) and version.is_integer():  # a table's column with gaps holds floats
        version = int(version)
    if not isinstance(version, int) or isinstance(version, bool) or version < UNVERSIONED:
        raise UserError(f"a stored result has schema_version {value!r}: not one critiquelab writes")
    if version > RESULT_SCHEMA:
        raise UserError(f"a stored result has schema_version {version}, newer than this critiquelab reads "
                        f"(up to {RESULT_SCHEMA}): read it with the version that wrote it, or upgrade")
    return version


def upgrade_record(data: Mapping[str, object]) -> dict[str, object]:
    """A stored result of any version as the current version's fields (``schema_version``
    included); the values are then validated by the model."""
    record = dict(data)
    version = stored_version(record.get("schema_version"))
    while version < RESULT_SCHEMA:
        record = _record_step(version, record)
        version += 1
    record["schema_version"] = RESULT_SCHEMA
    return record


def _record_step(version: int, record: dict[str, object]) -> dict[str, object]:
    """One record from ``version`` to the next."""
    if version == 1:
        extra = record.get("extra")
        if isinstance(extra, Mapping) and any(name in extra for name in _MOVED_OUT_OF_EXTRA):
            moved = {name: extra[name] for name in _MOVED_OUT_OF_EXTRA if name in extra}
            # A field stored in its own place as well wins over its copy among the figures.
            record = {**moved, **record, "extra": {k: v for k, v in extra.items() if k not in moved}}
        return record
    raise AssertionError(f"no upgrade from result schema {version}")  # pragma: no cover


def upgrade_table(frame: Any) -> Any:
    """A per-problem table (pandas) of any version with the current version's columns, every row
    of the current version: what a reader of columns (rather than records) reads."""
    versions = frame["schema_version"] if "schema_version" in frame.columns else None
    found = {UNVERSIONED} if versions is None else {
        stored_version(None if v != v else v) for v in versions.tolist()  # NaN: a row of an older table
    }
    for version in range(min(found, default=RESULT_SCHEMA), RESULT_SCHEMA):
        frame = _table_step(version, frame)
    return frame.assign(schema_version=RESULT_SCHEMA)


def _table_step(version: int, frame: Any) -> Any:
    """A table's columns from ``version`` to the next; rows of a later version in the same table
    (tables concatenated) are left as they are."""
    if version == 1:
        for name in _MOVED_OUT_OF_EXTRA:
            old = f"extra.{name}"
            if old not in frame.columns:
                continue
            if name in frame.columns:  # both: a row's own value wins, else its figure's
                frame = frame.assign(**{name: frame[name].fillna(frame[old])}).drop(columns=[old])
            else:  # renamed in place: the column keeps its position
                frame = frame.rename(columns={old: name})
        if "isolation" not in frame.columns:  # older still: written before levels were recorded
            frame = frame.assign(isolation="")  # the field's default: not known
        return frame
    raise AssertionError(f"no upgrade from result schema {version}")  # pragma: no cover
