"""The SQLite file that holds skills, their uses, and proposals.

Why SQLite and not Chroma metadata: skills and proposals are small records whose counters and
approval flags change after every use and from other processes (`critiquelab memory approve`
while a run goes on). SQLite updates them atomically (one transaction per change), durably,
with no embedding to recompute, and it is in the standard library.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from critiquelab.core.errors import UserError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS skills (
    id TEXT PRIMARY KEY, store TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
    role TEXT NOT NULL, category TEXT NOT NULL, template TEXT NOT NULL, confidence REAL NOT NULL,
    times_used INTEGER NOT NULL, times_succeeded INTEGER NOT NULL, source_task_ids TEXT NOT NULL,
    source_entry_ids TEXT NOT NULL, approved INTEGER NOT NULL, rejected INTEGER NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS proposals (
    id TEXT PRIMARY KEY, store TEXT NOT NULL, entry_id TEXT NOT NULL, from_role TEXT NOT NULL,
    to_role TEXT NOT NULL, summary TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL,
    decided_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS skill_uses (
    store TEXT NOT NULL, skill_id TEXT NOT NULL, run_id TEXT NOT NULL, task_id TEXT NOT NULL,
    succeeded INTEGER NOT NULL, PRIMARY KEY (store, skill_id, run_id, task_id)
);
"""


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the memory database at ``path`` (created with its tables if new)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(str(path), timeout=30, check_same_thread=False, isolation_level=None)
        connection.row_factory = sqlite3.Row
        connection.executescript(_SCHEMA)
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"cannot open the memory database {path}: {exc}") from exc
    return connection
