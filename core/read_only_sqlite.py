"""Reading another program's SQLite file without writing to it (Chroma's and MLflow's stores):
opened read-only through a ``file:`` URI, so not even a journal or a lock file is created."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def query_read_only(database: Path, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows ``sql`` (with ``?`` bound to ``parameters``) selects from ``database``;
    :class:`sqlite3.Error` when the file is no SQLite database (or lacks what ``sql`` reads)."""
    with contextlib.closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as db:
        return db.execute(sql, tuple(parameters)).fetchall()
