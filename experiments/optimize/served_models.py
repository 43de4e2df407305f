"""The LMs of an optimisation: the task model, the teacher, the refine engine's model.

Each is served (a bundled model's local server started) when a step first asks for it, and
stopped once no later step needs it: the 1.5B model's server alone takes ~5 GB.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Literal

from critiquelab.core.errors import UserError
from critiquelab.experiments.optimize.spec import OptimizeSpec
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.experiments.serving.model_files import resolve_bundled
from critiquelab.experiments.serving.provision import CacheUse, resolve_model, serve_model
from critiquelab.experiments.spec.experiment import ModelSpec

ModelRole = Literal["task", "teacher", "refine"]


class ServedModels:
    """The optimisation's LMs by role; a context manager that stops every server still running."""

    def __init__(self, spec: OptimizeSpec, home: Path, *, cache: bool) -> None:
        self._spec, self._home = spec, home
        self._cache_use: CacheUse = "use" if cache else "refresh"  # --no-cache: ask again, keep the new
        self._stack = contextlib.ExitStack()
        self._servers: dict[ModelRole, contextlib.ExitStack] = {}
        self._lms: dict[ModelRole, HarnessLM] = {}

    def served_as(self, role: ModelRole) -> ModelRole:
        """The LM that plays ``role``: refine without a model of its own uses the teacher, else
        the task model (the same LM, the same server); no teacher means the task model."""
        spec = self._spec
        if role == "refine" and (spec.refine is None or spec.refine.model is None):
            role = "teacher"
        if role == "teacher" and spec.teacher is None:
            return "task"
        return role

    def get(self, role: ModelRole) -> HarnessLM:
        """The LM of ``role``, served now if it is not yet."""
        served = self.served_as(role)
        if served not in self._lms:
            model = self._model_spec(served)
            server = self._stack.enter_context(contextlib.ExitStack())
            self._lms[served] = server.enter_context(
                serve_model(resolve_model(model), model, self._home, cache=self._cache_use)
            )
            self._servers[served] = server
        return self._lms[served]

    def check(self, roles: Iterable[ModelRole], start: Iterable[ModelRole]) -> None:
        """Before anything is written: the LM of each of ``roles`` that a remote endpoint serves is
        probed (and kept: it holds nothing), and those of ``start`` are served now — a bundled
        model's server too (the first step starts them at once anyway). A later step's bundled
        model is started when its step comes, so two local servers never hold memory together."""
        now = {self.served_as(role) for role in start}
        for served in sorted({self.served_as(role) for role in roles} | now):
            if served in now or resolve_bundled(self._model_spec(served).id) is None:
                try:
                    self.get(served)
                except UserError as exc:
                    raise UserError(str(exc) if served == "task" else f"{served} model: {exc}") from exc

    def release(self, served: ModelRole) -> None:
        """Stop the LM served as ``served`` (see :meth:`served_as`), if it is running."""
        if served in self._servers:
            self._servers.pop(served).close()
            self._lms.pop(served)

    def _model_spec(self, served: ModelRole) -> ModelSpec:
        spec = self._spec
        if served == "refine" and spec.refine is not None and spec.refine.model is not None:
            return spec.refine.model
        if served == "teacher" and spec.teacher is not None:
            return spec.teacher
        return spec.model

    def __enter__(self) -> ServedModels:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None,
    ) -> None:
        self._stack.close()
