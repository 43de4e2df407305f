"""Experiment specs for tests."""

from __future__ import annotations


def fake_spec(api_base: str, *, pipelines: list[dict] | None = None, limit: int = 3, **extra: object) -> dict:
    """An experiment spec pointing at a fake OpenAI-compatible endpoint."""
    spec = {
        "name": "test-experiment",
        "dataset": {"source": "humaneval", "limit": limit},
        "model": {"id": "openai/fake", "api_base": api_base, "num_retries": 0},
        "pipelines": pipelines or [{"name": "baseline"}],
        "seeds": [0],
    }
    spec.update(extra)
    return spec
