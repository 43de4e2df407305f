"""The local MLflow store (a SQLite file, ``sqlite:///PATH``) looked at before MLflow opens it.

Why: MLflow opens whatever file the URI names and, finding no tables, creates its whole schema in
it — also for a command that only reads (compare, export, view), which would turn an empty or
foreign database into an MLflow store and print its migration lines. A file that is no SQLite
database at all (a damaged or foreign file, a directory) is a traceback from SQLAlchemy deep in
the first call. Both are bad input, told in one line before MLflow touches the file; the file is
read here only, opened read-only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from critiquelab.core.errors import UserError
from critiquelab.core.read_only_sqlite import query_read_only

_SQLITE = "sqlite:///"
# Tables every MLflow SQL store has had since its first schema; alembic_version is its migration
# stamp, which a foreign database that merely has tables of these names lacks.
_MLFLOW_TABLES = frozenset({"experiments", "runs", "alembic_version"})


def _store_file(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` tracking URI; None for any other store."""
    return Path(uri.removeprefix(_SQLITE)) if uri.startswith(_SQLITE) else None


def holds_runs(uri: str) -> bool:
    """For a command that reads runs: whether the local store at ``uri`` exists with MLflow's
    tables (False: no file yet, or an empty one — there is nothing to read, and opening it would
    create the store). True for a tracking server or database that is not a local file: it
    answers for itself. A file that cannot be an MLflow store is a :class:`UserError`."""
    path = _store_file(uri)
    return path is None or bool(_tables(path))


def require_runs(uri: str, wanted: str) -> None:
    """For a command that reads runs: a :class:`UserError` unless :func:`holds_runs` — one line
    beginning with ``wanted`` (what the reader was asked for) and naming where it looked."""
    if not holds_runs(uri):  # a local file, then; opening it would create the store
        raise UserError(f"{wanted}: no MLflow store at {_store_file(uri)} yet "
                        "(run an experiment first, or pass --home)")


def check_writable_store(uri: str) -> None:
    """For a command that logs runs: a local store file that exists must be an MLflow store or
    empty (MLflow then creates its tables); anything else is a :class:`UserError` now, before
    anything is written."""
    path = _store_file(uri)
    if path is not None:
        _tables(path)


def _tables(path: Path) -> frozenset[str]:
    """The tables of the MLflow store at ``path`` (empty: no such file, or a database with no
    tables yet); a :class:`UserError` for a file that is not an MLflow store."""
    if not path.exists():
        return frozenset()
    if not path.is_file():
        raise UserError(f"the MLflow store {path} is not a file: move it aside, or pass --home")
    try:
        tables = frozenset(name for (name,) in query_read_only(
            path, "SELECT name FROM sqlite_master WHERE type = 'table'"))
    except sqlite3.Error as exc:
        raise UserError(f"the MLflow store {path} is not an SQLite database ({exc}): "
                        "move it aside, or pass --home") from exc
    if tables and not tables >= _MLFLOW_TABLES:
        raise UserError(f"the MLflow store {path} is an SQLite database without MLflow's tables "
                        "(experiments, runs, alembic_version): move it aside, or pass --home")
    return tables
