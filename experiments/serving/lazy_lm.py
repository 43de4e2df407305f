"""The experiment's model, started on first use."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from critiquelab.experiments.serving.provision import CacheUse, ModelIdentity, serve_model
from critiquelab.experiments.spec.experiment import ExperimentSpec


class LazyLM:
    """Starts the model (server) only when a problem actually needs it, so re-running a
    finished experiment neither starts a server nor makes an LM call."""

    def __init__(self, identity: ModelIdentity, spec: ExperimentSpec, home: Path, cache: bool):
        self._args = (identity, spec.model, home)
        self._cache = cache
        self._stack = contextlib.ExitStack()
        self._lm: Any = None

    def get(self) -> Any:
        if self._lm is None:
            identity, model, home = self._args
            use: CacheUse = "use" if self._cache else "refresh"
            self._lm = self._stack.enter_context(serve_model(identity, model, home, cache=use))
        return self._lm

    def served_by(self) -> dict[str, str]:
        """What serves the model (empty until it is started)."""
        return dict(self._lm.served_by) if self._lm is not None else {}

    def close(self) -> None:
        self._stack.close()
