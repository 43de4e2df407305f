"""Provision the LM an experiment names: the bundled local model (assembled, verified, served
on 127.0.0.1 for the duration of a ``with`` block) or any LiteLLM model string."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import dspy
from dspy.utils.exceptions import LMConfigurationError

from critiquelab.core.errors import FieldError, UserError, error_line
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.experiments.serving.local_server import LocalModelServer, select_backend
from critiquelab.experiments.serving.model_files import ensure_model_file, resolve_bundled
from critiquelab.experiments.serving.server_build import find_built_server
from critiquelab.experiments.spec.experiment import ModelSpec


@dataclass(frozen=True)
class ModelIdentity:
    """What a model name resolves to; logged with every run and part of every cache key."""

    requested: str
    resolved: str  # bundled model key, or the LiteLLM model string
    file_sha256: str | None = None  # bundled models only
    file_path: Path | None = None
    api_base: str | None = None

    @property
    def is_local(self) -> bool:
        return self.file_path is not None

    @property
    def cache_identity(self) -> str:
        if self.file_sha256:
            return f"local:{self.file_sha256}"
        return f"{self.resolved}@{self.api_base or 'default'}"


def resolve_model(spec: ModelSpec) -> ModelIdentity:
    """Identify the model; for a bundled one, assemble and verify its file (no server yet)."""
    bundled = resolve_bundled(spec.id)
    if bundled is not None:
        path = ensure_model_file(bundled)
        return ModelIdentity(spec.id, bundled.key, bundled.sha256, path)
    if "/" not in spec.id:
        raise UserError(
            f"model '{spec.id}': use 'local', 'local-1.5b' or a LiteLLM string such as "
            "'openai/gpt-4o-mini' (provider/model)"
        )
    return ModelIdentity(spec.id, spec.id, api_base=spec.api_base)


def check_model_settings(identity: ModelIdentity, spec: ModelSpec) -> None:
    """Refuse, as one line, the settings DSPy refuses for this endpoint model — a reasoning
    model's temperature and max_tokens, a provider prefix with no model id. Contacts nothing, so
    ``run --estimate`` checks them as a run does."""
    if identity.is_local:
        return  # the bundled models take any temperature and max_tokens
    try:
        dspy.LM(identity.resolved, temperature=spec.temperature, max_tokens=spec.max_tokens)
    except (ValueError, LMConfigurationError) as exc:
        raise UserError(f"model '{identity.resolved}': {error_line(exc)}") from exc


def draft_model_file() -> Path:
    """The bundled model that drafts under ``speculative: draft``: the 0.5B, for the 1.5B of the
    same family and tokenizer (the spec allows 'draft' with 'local-1.5b' only)."""
    draft = resolve_bundled("local")
    assert draft is not None
    return ensure_model_file(draft)


def _api_key(spec: ModelSpec) -> str | None:
    if spec.api_key_env:
        value = os.environ.get(spec.api_key_env)
        if not value:
            raise FieldError("model.api_key_env", spec.api_key_env, "that environment variable is not set")
        return value
    if spec.api_base and not os.environ.get("OPENAI_API_KEY"):
        return "no-key"  # self-hosted OpenAI-compatible servers accept any key; LiteLLM needs one
    return None


def _preflight(lm: HarnessLM, where: str) -> None:
    """One tiny uncached request, so an unreachable endpoint fails before any run is created."""
    # A hung endpoint answers nothing: the probe waits at most a minute, not a full request's limit.
    probe = lm.copy(num_retries=0, timeout=min(60.0, lm.kwargs.get("timeout") or 60.0))
    probe.probing = True
    try:
        probe("Reply with OK.", max_tokens=1, cache=False)
    except Exception as exc:
        first = error_line(exc)
        first = first.removeprefix(f"model endpoint {where} failed at start-up: ")
        raise UserError(
            f"model endpoint {where} is not usable at start-up: {first}; check --model/--api-base, "
            "that the server is running, and the API key"
        ) from exc


CacheUse = Literal["use", "refresh", "off"]
"""The LM response cache under the data directory: ``use`` it (replay, keep new answers),
``refresh`` it (``--no-cache``: ask again and replace what was kept), or leave it ``off`` (a Ray
node's own server, whose answers the driver's cache keeps)."""


@contextlib.contextmanager
def serve_model(
    identity: ModelIdentity, spec: ModelSpec, data_dir: Path, *, cache: CacheUse = "use"
) -> Iterator[HarnessLM]:
    """Yield a ready LM; a bundled model's server is stopped when the block exits, however."""
    common: dict[str, Any] = {  # HarnessLM's settings, whichever endpoint serves the model
        "temperature": spec.temperature, "max_tokens": spec.max_tokens,
        "num_retries": spec.num_retries, "timeout": spec.request_timeout_s,
        "cache_dir": None if cache == "off" else data_dir / "lm_cache", "refresh": cache == "refresh",
        "identity": identity.cache_identity,
    }
    if identity.is_local:
        assert identity.file_path is not None and identity.file_sha256 is not None
        alias = f"{identity.resolved}@{identity.file_sha256[:12]}"
        logs = data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        backend = select_backend(spec.server, find_built_server())
        with LocalModelServer(
            identity.file_path, alias, backend=backend, n_ctx=spec.n_ctx, slots=spec.slots,
            log_path=logs / "llama-server.log", speculation=spec.speculative,
            draft_model=draft_model_file() if spec.speculative == "draft" else None,
        ) as server:
            # The model name, like the cache key, is the same whichever server runs.
            lm = HarnessLM(f"openai/{alias}", api_base=server.api_base, api_key="local", **common)
            lm.served_by = server.params()
            try:
                yield lm
            finally:
                lm.close()
        return
    key = _api_key(spec)
    extra: dict[str, Any] = {"api_base": spec.api_base} if spec.api_base else {}
    if key:
        extra["api_key"] = key
    check_model_settings(identity, spec)  # one line, before anything is written
    lm = HarnessLM(identity.resolved, **extra, **common)
    _preflight(lm, spec.api_base or identity.resolved)
    try:
        yield lm
    finally:
        lm.close()
