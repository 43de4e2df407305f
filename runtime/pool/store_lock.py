"""One process at a time on a local Chroma store: an exclusive ``flock`` on a file inside it.

Why: Chroma's local mode (``PersistentClient``) is single-process. Each process keeps its own
HNSW index in memory and writes it back, so two processes on one store leave index files that
disagree, and every later open of that store crashes. A second critiquelab process that would
open a store already in use is refused with one line (a :class:`StoreInUseError`, exit code 2)
before it opens or writes anything.

Why ``flock`` and not a pid file: the kernel drops the lock when the last descriptor of its open
file is closed, so a killed process (SIGKILL, an OOM kill) never leaves a stale lock behind. The
holder's pid is written into the file only so the refusal can name it.

Within one process the lock is counted, not exclusive: Chroma shares one client per directory
inside a process, so the run, its memory bank and a read of the same store may overlap. A store
process (:mod:`critiquelab.runtime.pool.chroma_process`) inherits its parent's descriptor, so the lock
lasts until both have let go: a parent killed mid-run leaves the store locked while its store
process still flushes. A Chroma server (``url``) serialises its clients itself: no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError

LOCK_NAME = "critiquelab.lock"


class StoreInUseError(UserError):
    """Another process has the local Chroma store open."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path, self.pid = path, pid
        holder = f" (pid {pid})" if pid else ""
        super().__init__(
            f"the Chroma store {path} is in use by another critiquelab process{holder}; Chroma's local "
            "store allows one process at a time: wait for it to finish, or use another data directory "
            "(--home) or a Chroma server (pool.chroma_url)"
        )

    def __reduce__(self) -> tuple[type[StoreInUseError], tuple[Path, int | None]]:
        return StoreInUseError, (self.path, self.pid)  # survives the trip from a store process


@dataclass
class _Held:
    fd: int
    count: int


_held: dict[str, _Held] = {}  # by the store directory's real path
_registry = threading.Lock()


def usable_directory(path: Path | str) -> Path:
    """``path``, created if need be; a UserError now, in the caller's terms, if it cannot be."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the message store directory {directory}: {exc}") from exc
    if not os.access(directory, os.W_OK):
        raise UserError(f"the message store directory {directory} is not writable")
    return directory


def _key(path: Path | str) -> str:
    return os.path.realpath(path)


class StoreLock:
    """One hold on a store's lock (see :func:`lock_store`); ``release`` is idempotent."""

    def __init__(self, key: str) -> None:
        self._key: str | None = key

    @property
    def fd(self) -> int:
        """The descriptor that holds the lock, for a child process to inherit."""
        if self._key is None:
            raise RuntimeError("the store lock was released")
        return _held[self._key].fd

    def release(self) -> None:
        with _registry:
            key, self._key = self._key, None
            if key is None:
                return
            held = _held[key]
            held.count -= 1
            if held.count == 0:
                del _held[key]
                os.close(held.fd)  # the lock goes with the last descriptor of its open file

    def __enter__(self) -> StoreLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_store(path: Path | str) -> StoreLock:
    """Hold the lock of the local Chroma store in ``path`` (created if need be) until
    ``release``; a :class:`StoreInUseError` at once (it never waits) if another process holds it."""
    usable_directory(path)  # first: the lock file lives inside it
    held = _lock(path, create=True)
    assert held is not None  # created, so never missing
    return held


def lock_existing_store(path: Path | str) -> StoreLock | None:
    """:func:`lock_store` for a start checking early, before anything of its own may be written:
    it creates nothing, and is ``None`` if the store has no lock file yet (never locked, so no
    process holds it)."""
    return _lock(path, create=False)


def _lock(path: Path | str, *, create: bool) -> StoreLock | None:
    key = _key(path)
    with _registry:
        if key in _held:
            _held[key].count += 1
            return StoreLock(key)
        try:
            fd = os.open(Path(key) / LOCK_NAME, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not create:
                return None
            raise UserError(f"cannot lock the Chroma store {path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _recorded_pid(fd)
            os.close(fd)
            raise StoreInUseError(Path(path), pid) from None
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):  # the pid only names the holder in a refusal
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[key] = _Held(fd, 1)
        return StoreLock(key)


def _recorded_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def close_then_release(client: Any, lock: StoreLock | None) -> None:
    """Close a Chroma client, then release its store's lock: Chroma shares one client per
    directory in a process and keeps it (its in-memory index included) until its last user
    closes it, and another process may open the store only after that."""
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()
    if lock is not None:
        lock.release()


def adopt_store_lock(path: Path | str, fd: int) -> None:
    """In a store process: ``fd``, inherited from the parent, is this process's lock on ``path``
    (a second ``flock`` on a new descriptor would be refused: the parent holds it). Held until
    the process exits, so the lock outlasts a parent killed while this process still writes."""
    with _registry:
        _held[_key(path)] = _Held(fd, 1)


class HeldStores:
    """The locks of the local stores a command will open, held until it ends.

    A command that writes something before it opens its stores (the MLflow parent run, a
    checkpoint directory) takes their locks first: ``take(create=False)`` at its very start,
    for stores already locked once (it creates nothing, so a start refused for another reason
    leaves nothing behind), then ``take()`` just before its first file.
    """

    def __init__(self, paths: Iterable[Path]) -> None:
        self._paths = list(paths)
        self._locks: dict[Path, StoreLock] = {}

    def take(self, *, create: bool = True) -> None:
        for path in self._paths:
            if path not in self._locks:
                held = lock_store(path) if create else lock_existing_store(path)
                if held is not None:
                    self._locks[path] = held

    def release(self) -> None:
        for held in self._locks.values():
            held.release()
        self._locks.clear()

    def __enter__(self) -> HeldStores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = [
    "LOCK_NAME", "HeldStores", "StoreInUseError", "StoreLock", "adopt_store_lock", "close_then_release",
    "lock_existing_store", "lock_store", "usable_directory",
]
