"""Where state lives: one data directory per project, one shared cache for model files."""

from __future__ import annotations

import os
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
