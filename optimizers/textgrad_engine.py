"""A TextGrad engine for any OpenAI-compatible endpoint (bundled llama-cpp server, vLLM, OpenAI).

Why not TextGrad's own engines: ``ChatOpenAI`` only accepts OpenAI itself or one fixed Ollama
URL, and the LiteLLM engine drops the base URL, temperature and max tokens — so the bundled
model could not be the backward engine, and a run's settings would not be what was configured.
This engine sends exactly the configured model, temperature and max tokens to the configured
base URL, and caches replies on disk keyed by SHA-256 of (endpoint identity, request) so a
re-run of a refinement step costs no LM calls.

Importing ``textgrad`` creates ``$TEXTGRAD_LOG_DIR`` (default ``./logs/``, i.e. wherever the
process runs) and logs every prompt there; :func:`import_textgrad` points it at a temporary
directory first, unless the caller chose one (``critiquelab optimize`` chooses the data
directory's ``logs/textgrad``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any


def import_textgrad() -> Any:
    """``import textgrad``, with its prompt log outside the working directory."""
    os.environ.setdefault("TEXTGRAD_LOG_DIR", str(Path(tempfile.gettempdir()) / "critiquelab-textgrad-logs"))
    import textgrad

    # TextGrad logs every prompt at INFO to its own file; propagated, each would also reach the
    # terminal through the CLI's root handler.
    logging.getLogger("textgrad").propagate = False
    return textgrad


import_textgrad()
# Re-exported (``as``): importing it from here is what sets the log directory first.
from textgrad.engine import EngineLM as EngineLM  # noqa: E402  (after the log directory is set)

DEFAULT_SYSTEM_PROMPT = "You are a helpful, creative, and smart assistant."


class OpenAICompatibleEngine(EngineLM):
    """``engine(prompt, system_prompt=...) -> str`` over ``/v1/chat/completions``.

    ``identity`` names the endpoint in the cache key (default ``<model>@<base_url>``); pass a
    stable one when the URL is not (the bundled server's port changes every run). The API key
    is never part of the key.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        cache_dir: Path | None = None,
        identity: str | None = None,
        timeout_s: float = 600.0,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    ) -> None:
        self.model_string = model
        self.base_url = base_url
        self.api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.identity = identity or f"{model}@{base_url or 'default'}"
        self.timeout_s = timeout_s
        self.system_prompt = system_prompt
        self.calls = 0  # requests actually sent (cache hits excluded)
        self._client: Any = None

    def _openai(self) -> Any:
        if self._client is None:
            from openai import OpenAI  # imported on first use: the module stays cheap to import

            self._client = OpenAI(
                base_url=self.base_url, api_key=self.api_key or "unused", timeout=self.timeout_s,
                max_retries=0,
            )
        return self._client

    def request(self, prompt: str, system_prompt: str | None = None) -> dict[str, Any]:
        """The chat-completions body this engine sends for ``prompt``."""
        return {
            "model": self.model_string,
            "messages": [
                {"role": "system", "content": system_prompt or self.system_prompt},
                {"role": "user", "content": prompt},
            ],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    def cache_key(self, body: dict[str, Any]) -> str:
        blob = json.dumps({"identity": self.identity, "request": body}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _cache_path(self, key: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / key[:2] / f"{key}.json"

    def generate(self, content: Any, system_prompt: str | None = None, **kwargs: Any) -> str:
        """Reply to ``content`` (text; TextGrad's multimodal lists are not supported here).

        ``kwargs`` (TextGrad passes none on the paths used here) are ignored on purpose: the
        configured settings are what every request carries."""
        if not isinstance(content, str):
            raise TypeError("OpenAICompatibleEngine takes text prompts only")
        body = self.request(content, system_prompt)
        path = self._cache_path(self.cache_key(body))
        if path is not None and path.is_file():
            return str(json.loads(path.read_text())["text"])
        response = self._openai().chat.completions.create(**body)
        self.calls += 1
        text = response.choices[0].message.content or ""
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"text": text}))
            tmp.replace(path)
        return text

    def __call__(self, prompt: Any, **kwargs: Any) -> str:
        return self.generate(prompt, **kwargs)


def engine_from_lm(lm: Any, *, cache_dir: Path | None = None, **overrides: Any) -> OpenAICompatibleEngine:
    """An engine talking to the same endpoint, model and settings as a ``dspy.LM`` (or the
    harness's ``HarnessLM``, whose ``identity`` keeps the cache stable across server ports)."""
    kwargs = dict(getattr(lm, "kwargs", {}) or {})
    model = str(lm.model)
    if model.startswith("openai/"):
        model = model[len("openai/"):]
    settings: dict[str, Any] = {
        "base_url": kwargs.get("api_base") or kwargs.get("base_url"),
        "api_key": kwargs.get("api_key"),
        "temperature": float(kwargs.get("temperature") or 0.0),
        "max_tokens": int(kwargs.get("max_tokens") or kwargs.get("max_completion_tokens") or 1024),
        "identity": getattr(lm, "identity", None),
        "cache_dir": cache_dir,
    }
    settings.update(overrides)
    return OpenAICompatibleEngine(model, **settings)


__all__ = ["OpenAICompatibleEngine", "engine_from_lm", "import_textgrad"]
