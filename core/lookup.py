"""A path the user gave, looked up before anything asks whether it exists.

Why: ``Path.exists()`` answers False for a missing file but raises for a name the system
cannot look up at all — a component longer than the file system allows (``File name too
long``) — and answers False for a symbolic-link loop, which the caller would then report as
"no such file". Both are the user's path at fault, so both are one clear line.
"""

from __future__ import annotations

import errno
from pathlib import Path

from critiquelab.core.errors import UserError

_NOT_THERE = (errno.ENOENT, errno.ENOTDIR)


def user_path(text: str | Path) -> Path:
    """``text`` as a path with a leading ``~`` or ``~name`` expanded, as a shell expands it: a
    ``~name`` whose user does not exist stays as written (``Path.expanduser`` raises for it, so
    the path would otherwise end the command with a traceback instead of "not found")."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        return Path(text)


def check_lookup(path: Path, what: str) -> None:
    """A :class:`UserError` naming ``what`` (e.g. ``dataset 'x.jsonl'``) when ``path`` cannot be
    looked up; nothing when it exists or simply is not there (the caller says that its own way)."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno not in _NOT_THERE:
            raise UserError(f"{what}: {exc.strerror or exc}") from None
