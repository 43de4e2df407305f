"""Pipelines registered by name, so YAML specs, the CLI and MLflow params can name them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

import dspy

from eval.errors import UserError

PipelineFactory = Callable[..., dspy.Module]
F = TypeVar("F", bound=PipelineFactory)

_REGISTRY: dict[str, PipelineFactory] = {}
# Modules whose import registers the built-in pipelines; loaded on first lookup, not at import.
_BUILTIN_MODULES = (
    "pipelines.baseline", "pipelines.critic_loop", "pipelines.self_refine", "pipelines.debate",
    "pipelines.vote",
)


def register_pipeline(name: str) -> Callable[[F], F]:
    """Class decorator: make a ``dspy.Module`` subclass constructible by ``name``."""

    def decorate(factory: F) -> F:
        if name in _REGISTRY and _REGISTRY[name] is not factory:
            raise ValueError(f"pipeline name '{name}' is already registered")
        _REGISTRY[name] = factory
        return factory

    return decorate


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def pipeline_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def create_pipeline(name: str, **params: Any) -> dspy.Module:
    """Build a registered pipeline; unknown names and bad params are user errors."""
    _load_builtins()
    if name not in _REGISTRY:
        raise UserError(f"unknown pipeline '{name}'; registered: {', '.join(sorted(_REGISTRY))}")
    try:
        return _REGISTRY[name](**params)
    except TypeError as exc:
        raise UserError(f"pipeline '{name}': bad parameters {sorted(params)}: {exc}") from exc
