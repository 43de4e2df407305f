"""Fixtures for the message-pool tests."""

from __future__ import annotations

import pytest
from support.pool import HashEmbedder


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture(scope="session")
def minilm():
    """The real bundled MiniLM, loaded once for the session (a few seconds)."""
    from critiquelab.runtime.pool.embedder import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    embedder(["warm up"])
    return embedder
