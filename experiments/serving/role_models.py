"""The LMs of roles that a spec gives their own model, temperature or max_tokens, and token use per model.

A role's ``model`` other than the experiment's is provisioned like the experiment's (a bundled
model served on 127.0.0.1, or a LiteLLM endpoint checked with one request) the first time it is
needed, and stopped with the experiment's. Each child run binds its roles' LMs, copied with the
run's seed and the role's temperature (:func:`critiquelab.runtime.role_lms.using_role_lms`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.serving.provision import ModelIdentity, resolve_model, serve_model
from critiquelab.experiments.spec.experiment import ExperimentSpec, ModelSpec
from critiquelab.experiments.spec.pipeline_spec import PipelineSpec, RoleSpec

_Key = tuple[str, str | None]  # (model, api_base)


class RoleModels:
    """Role LMs of one experiment. Resolving every role model (assembling a bundled model's
    file, refusing an unknown one) happens at construction, before any run is created."""

    def __init__(self, spec: ExperimentSpec, home: Path, cache: bool) -> None:
        self._spec, self._home, self._cache = spec, home, cache
        self._stack = contextlib.ExitStack()
        self._served: dict[_Key, Any] = {}
        self._identities: dict[_Key, tuple[ModelIdentity, ModelSpec]] = {}
        for pipeline in spec.pipelines:
            for role in pipeline.roles.values():
                key = self._key(role)
                if key is not None and key not in self._identities:
                    model = spec.model.model_copy(update={"id": key[0], "api_base": key[1]})
                    if model.speculative == "draft" and model.id != "local-1.5b":
                        # the 0.5B drafts for the 1.5B; a role on another model generates plainly
                        model = model.model_copy(update={"speculative": "off"})
                    self._identities[key] = (resolve_model(model), model)

    def _key(self, role: RoleSpec) -> _Key | None:
        """Which other model the role runs on; None: the experiment's own."""
        if role.model is None:
            return None
        main = self._spec.model
        if role.model == main.id and role.api_base in (None, main.api_base):
            return None
        return (role.model, role.api_base)

    def start(self) -> None:
        """Start (and check) every role model now, so a bad endpoint fails before any run exists."""
        for key in self._identities:
            self._lm(key)

    def _lm(self, key: _Key) -> Any:
        if key not in self._served:
            identity, model = self._identities[key]
            self._served[key] = self._stack.enter_context(
                serve_model(identity, model, self._home, cache="use" if self._cache else "refresh")
            )
        return self._served[key]

    def lms_for(self, pipeline: PipelineSpec, main_lm: Any, seed: int) -> dict[str, Any]:
        """Each configured role's LM for a run with ``seed``: its model, the run's seed (as the
        experiment's LM gets it), its temperature; bound to every name the role's calls are made
        as (a critic panel's ``critic_correctness`` is the critic role,
        :mod:`critiquelab.pipelines.roles`)."""
        lms = {}
        for name, role in pipeline.roles.items():
            key = self._key(role)
            lm = main_lm if key is None else self._lm(key)
            if key is not None and self._spec.model.send_seed:
                lm = lm.copy(seed=seed)
            if role.temperature is not None:
                lm = lm.copy(temperature=role.temperature)
            if role.max_tokens is not None:
                lm = lm.copy(max_tokens=role.max_tokens)
            lms.update(dict.fromkeys(_call_names(pipeline, name), lm))
        return lms

    def close(self) -> None:
        self._stack.close()


def models_by_role(pipeline: PipelineSpec) -> dict[str, str]:
    """The model each configured role runs on (other roles run on the experiment's model), by
    every name its calls are made as (what a result's ``usage_by_role`` is keyed by)."""
    return {call: role.model for name, role in pipeline.roles.items() if role.model is not None
            for call in _call_names(pipeline, name)}


def _call_names(pipeline: PipelineSpec, role: str) -> tuple[str, ...]:
    """``role`` and the other names its pipeline declares its calls are made as."""
    from critiquelab.pipelines.registry import role_map

    declared = role_map(pipeline.name).roles.get(role)
    return (role, *(declared.calls if declared is not None else ()))


def usage_by_model(
    results: Sequence[ProblemResult], models: Mapping[str, str], default: str
) -> dict[str, float]:
    """``model.<id>.calls`` / ``.tokens`` over ``results``: each role's usage counted toward the
    model it ran on (``models``; ``default`` for the rest), with ``.model_s`` / ``.timed_tokens``,
    the seconds that model took and the tokens they cover (:class:`critiquelab.core.usage.RoleUsage`), from
    which compare weighs each model's tokens by its measured seconds per token. Empty when every
    role ran on ``default`` — the run's totals already say it all."""
    if not any(model != default for model in models.values()):
        return {}
    metrics: dict[str, float] = {}
    for result in results:
        for role, usage in result.usage_by_role.items():
            model = models.get(role, default)
            for name, amount in (
                ("calls", usage.get("calls", 0)),
                ("tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)),
                ("model_s", usage.get("model_s", 0.0)),
                ("timed_tokens", usage.get("timed_tokens", 0)),
            ):
                key = f"model.{model}.{name}"
                metrics[key] = metrics.get(key, 0) + amount
    return metrics
