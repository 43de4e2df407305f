"""Where state lives: one data directory per project, one shared cache for model files."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

from critiquelab.core.lookup import user_path


def data_dir() -> Path:
    """Experiment state (MLflow store, Chroma, checkpoints, LM cache, reports).

    ``$CRITIQUELAB_HOME`` when set, else ``./.critiquelab``.
    """
    return user_path(os.environ.get("CRITIQUELAB_HOME") or ".critiquelab").resolve()


def model_cache_dir() -> Path:
    """Assembled model files, shared by every data directory so none re-assembles a model.

    ``$CRITIQUELAB_CACHE`` when set, else ``$XDG_CACHE_HOME/critiquelab`` or ``~/.cache/critiquelab``.
    """
    explicit = os.environ.get("CRITIQUELAB_CACHE")
    if explicit:
        return user_path(explicit).resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return user_path(base).resolve() / "critiquelab"


def path_segment(name: str) -> str:
    """``name`` (an experiment name, a label) as one safe directory name inside the data
    directory: separators, ``..`` and anything unusual become ``_``, and a short digest of the
    original keeps two names that sanitise alike apart (or that share their first 80
    characters: a file name has at most 255 bytes). ``../../x`` can never leave the data
    directory, nor can an absolute name."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".") or "_"
    if safe == name and len(name) <= 80:
        return name
    return f"{safe[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def unwritable_dir(path: str | Path) -> str | None:
    """Why ``path`` cannot be a directory to write into, or None when it can: an existing
    directory that takes a new entry, or one that can be created. Tried, not guessed from
    permission bits (root passes every ``os.access`` check, yet ``/sys`` and ``/proc`` refuse):
    the missing directories are created, a probe entry is made in the last, and all of it is
    removed again, so nothing is left behind either way."""
    if not str(path).strip():
        return "an empty path (name a directory, e.g. '.')"
    path = user_path(path)
    try:
        if path.exists() and not path.is_dir():
            return f"'{path}' exists and is not a directory"
        missing = []
        for candidate in (path, *path.absolute().parents):
            if candidate.exists():
                if not candidate.is_dir():
                    return f"cannot create '{path}': '{candidate}' is not a directory"
                break
            missing.append(candidate)
    except (OSError, ValueError) as exc:
        return f"cannot use '{path}': {getattr(exc, 'strerror', None) or exc}"
    created: list[Path] = []
    try:
        for directory in reversed(missing):
            directory.mkdir()
            created.append(directory)
        os.rmdir(tempfile.mkdtemp(dir=path, prefix=".critiquelab-probe-"))
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        failed = getattr(exc, "filename", None)
        if failed is None or Path(failed) == path or Path(failed).parent == path:  # path itself, or the probe
            return f"cannot write into '{path}': {reason}"
        return f"cannot create '{path}': '{failed}': {reason}"
    finally:
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                directory.rmdir()
    return None


def check_writable_dir(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path`, or a :class:`~critiquelab.core.errors.UserError` naming ``what`` (where
    the files would go) when it cannot take them (see :func:`unwritable_dir`)."""
    from critiquelab.core.errors import UserError

    problem = unwritable_dir(path)
    if problem is not None:
        raise UserError(f"{what}: {problem}")
    return user_path(path)
