"""A Hugging Face ``datasets`` cache holding a few rows under a Hub name, made by the library.

``load_dataset("OWNER/NAME")`` offline reads what an earlier online load prepared under
``HF_DATASETS_CACHE/OWNER___NAME/<config>/<version>/<commit>/`` (Arrow files and
``dataset_info.json``, read by the packaged ``cache`` module). :func:`cache_hub_rows` writes that
layout with ``datasets``' own ``Generator`` builder, given the repository id, the dataset and
config names and the commit hash an online load would have used, so the tests load by name
exactly as a machine that pre-downloaded the set does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def offline_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty datasets cache for this test, with the Hub unreachable (offline mode)."""
    import datasets.config

    cache = tmp_path / "hf-datasets-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return cache


def _rows(rows: tuple[dict[str, Any], ...]) -> Iterator[dict[str, Any]]:
    yield from rows


def cache_hub_rows(cache: Path, name: str, rows: list[dict[str, Any]], *, config: str,
                   revision: str, split: str = "test") -> Path:
    """Put ``rows`` as split ``split`` of ``name``'s ``config`` at commit ``revision`` into
    ``cache``; returns the prepared directory. (A tuple: `Generator` would shard a list.)"""
    from datasets.packaged_modules.generator.generator import Generator

    builder = Generator(
        cache_dir=str(cache), repo_id=name, dataset_name=name.split("/")[-1], config_name=config,
        config_id=config, hash=revision, generator=_rows, gen_kwargs={"rows": tuple(rows)}, split=split,
    )
    builder.download_and_prepare()
    return Path(builder.cache_dir)
