"""Where state lives: one data directory per project, one shared cache for model files."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path


def data_dir() -> Path:
    """Experiment state (MLflow store, Chroma, checkpoints, LM cache, reports).

    ``$CRITIQUELAB_HOME`` when set, else ``./.critiquelab``.
    """
    return Path(os.environ.get("CRITIQUELAB_HOME") or ".critiquelab").expanduser().resolve()


def model_cache_dir() -> Path:
    """Assembled model files, shared by every data directory so none re-assembles a model.

    ``$CRITIQUELAB_CACHE`` when set, else ``$XDG_CACHE_HOME/critiquelab`` or ``~/.cache/critiquelab``.
    """
    explicit = os.environ.get("CRITIQUELAB_CACHE")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "critiquelab"


def path_segment(name: str) -> str:
    """``name`` (an experiment name, a label) as one safe directory name inside the data
    directory: separators, ``..`` and anything unusual become ``_``, and a short digest of the
    original keeps two names that sanitise alike apart. ``../../x`` can never leave the data
    directory, nor can an absolute name."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".") or "_"
    if safe == name:
        return name
    return f"{safe[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
