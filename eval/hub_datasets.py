"""Datasets on the Hugging Face Hub, named ``hf://OWNER/NAME``, read through ``datasets``.

Loading is ``datasets.load_dataset``'s own sequence (``load_dataset_builder``,
``download_and_prepare``, ``as_dataset``), spelt out to keep the builder: its ``hash`` is the
commit the rows come from, logged as the run's ``dataset.revision``. Where the Hub is reachable
(``HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0``) the library downloads into its own cache
(``HF_DATASETS_CACHE``, by default ``~/.cache/huggingface/datasets``); offline — the default here,
as for every Hugging Face library the harness uses — it reads the copy prepared there earlier.
Nothing is written under the data directory.

The dataset's identity is ``datasets``' fingerprint of the loaded split: a hash of the cache
path (``owner___name/config/version/commit``) and the split, so another commit, config or split
is another fingerprint, and so another checkpoint and cost key.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.eval.hub_sets import known_set

HUB_PREFIX = "hf://"
# A Hub repository id: NAME or OWNER/NAME, each part letters, digits, '-', '_', '.'.
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_SHORT_SHA = re.compile(r"[0-9a-f]{7,40}")
_NOT_CACHED = "Couldn't find cache for"  # datasets' words when a cached dataset lacks the config


@dataclass(frozen=True)
class HubSource:
    """What to read from the Hub: the repository, its config and split (None: the registry's
    default, else the dataset's own), and a pinned revision (commit sha, tag or branch)."""

    name: str
    config: str | None = None
    split: str | None = None
    revision: str | None = None

    def __str__(self) -> str:
        return HUB_PREFIX + self.name


def is_hub(source: str) -> bool:
    return source.startswith(HUB_PREFIX)


def hub_name(source: str) -> str:
    """The repository id of an ``hf://`` source, checked for shape."""
    name = source[len(HUB_PREFIX):]
    if not _REPO_ID.fullmatch(name):
        raise UserError(f"dataset '{source}': expected hf://OWNER/NAME, e.g. hf://openai/openai_humaneval")
    return name


def hub_location(source: str, config: str | None = None, split: str | None = None,
                 revision: str | None = None) -> str | HubSource:
    """A spec's ``dataset.source`` with its Hub fields, as ``critiquelab.eval.datasets`` takes it: the
    source, or the Hub dataset they describe. The Hub fields apply to ``hf://`` sources only."""
    if is_hub(source):
        return HubSource(hub_name(source), config, split, revision)
    given = [name for name, value in (("config", config), ("hf_split", split), ("revision", revision))
             if value is not None]
    if given:
        raise UserError(f"{', '.join(given)}: only for an hf://OWNER/NAME source, not '{source}'")
    return source


@dataclass(frozen=True)
class HubDataset:
    """One loaded split. ``revision`` is the commit its rows come from (None if unknown)."""

    source: HubSource
    config: str
    split: str
    revision: str | None
    table: Any  # datasets.Dataset, memory-mapped from the library's cache

    @property
    def fingerprint(self) -> str:
        return str(self.table._fingerprint)

    def rows(self) -> list[dict[str, Any]]:
        return list(self.table.to_list())


def _get_it(source: HubSource, config: str | None, split: str | None, offline: bool) -> str:
    """How to get a dataset that is neither cached nor reachable, in one line."""
    args = ", ".join([repr(source.name), *([repr(config)] if config else []),
                      *([f"split={split!r}"] if split else []),
                      *([f"revision={source.revision!r}"] if source.revision else [])])
    why = "offline mode is on" if offline else "the Hub cannot be reached"
    return (f"dataset '{source}' is not in the local Hugging Face cache and {why}: pre-download it on a "
            f"machine with network with `datasets.load_dataset({args})` and copy its cache "
            "(HF_DATASETS_CACHE, default ~/.cache/huggingface/datasets) here, run with HF_HUB_OFFLINE=0 "
            "HF_DATASETS_OFFLINE=0 where the Hub is reachable, or save it to a .jsonl/.parquet file "
            "and give that path")


@contextlib.contextmanager
def quiet_datasets(datasets: Any, level: int = logging.ERROR) -> Iterator[None]:
    """``datasets``' logs below ``level`` silenced: it warns on every offline load that it fell
    back to the cache (the run logs the revision it read instead), and logs a file it cannot read
    before raising what the caller turns into one line. Its logs stay on when ours are verbose
    (``--debug``)."""
    before = datasets.logging.get_verbosity()
    if not logging.getLogger().isEnabledFor(logging.INFO):
        datasets.logging.set_verbosity(level)
    try:
        yield
    finally:
        datasets.logging.set_verbosity(before)


def _check_revision(source: HubSource, builder: Any, from_cache: bool) -> None:
    """Offline, ``datasets`` reads the latest cached copy whatever revision was asked for: a
    pinned revision must then be the cached commit (or a prefix of it)."""
    wanted = source.revision
    if wanted is None or not from_cache:
        return
    held = str(builder.hash)
    if wanted == held or (_SHORT_SHA.fullmatch(wanted) and held.startswith(wanted)):
        return
    raise UserError(f"dataset '{source}': revision '{wanted}' is not the one in the local Hugging Face "
                    f"cache ({held}), and offline a tag or branch cannot be resolved; pin the cached "
                    "commit, or pre-download that revision on a machine with network")


def _choose_split(source: HubSource, wanted: str | None, splits: list[str]) -> str:
    """``wanted`` (the spec's or the registry's split), else ``test``, else the only split."""
    if wanted is None:
        if "test" in splits or len(splits) == 1:
            return "test" if "test" in splits else splits[0]
        raise UserError(f"dataset '{source}' has splits {splits}; choose one with dataset.hf_split")
    if wanted not in splits:
        raise UserError(f"dataset '{source}' has no split '{wanted}'; its splits: {splits}")
    return wanted


def _check_is_a_repository(source: HubSource) -> None:
    """``datasets`` reads a name that is one of its own file loaders (``json``, ``csv``, …) or a
    local path as local files, not as a Hub repository: ``hf://json`` would parse whatever the
    working directory holds."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    if source.name in _PACKAGED_DATASETS_MODULES:
        raise UserError(f"dataset '{source}': '{source.name}' is a file loader of `datasets`, not a "
                        "Hub repository; give the file's path without hf://")
    if Path(source.name).exists():
        raise UserError(f"dataset '{source}': '{source.name}' is a local path, which `datasets` "
                        "would read instead of the Hub repository; give it without hf://, or run "
                        "from another directory")


def load_hub(source: HubSource) -> HubDataset:
    """Load one split of ``source`` (see the module docstring); every failure is one line."""
    # Imported here: `datasets` takes seconds to import and most commands never need it.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets
    from datasets.packaged_modules.cache.cache import Cache

    _check_is_a_repository(source)
    known = known_set(source.name)
    config = known.config(source.config) if known else source.config
    split = source.split or (known.split if known else None)
    datasets.disable_progress_bars()
    with quiet_datasets(datasets):
        try:
            builder = datasets.load_dataset_builder(source.name, config, revision=source.revision)
            builder.download_and_prepare()
        except ConnectionError as exc:
            raise UserError(_get_it(source, config, split, datasets.config.HF_HUB_OFFLINE)) from exc
        except Exception as exc:  # datasets raises many types: missing repo, config, file, access
            text = " ".join(str(exc).split()) or type(exc).__name__
            if text.startswith(_NOT_CACHED):  # cached, but not this config
                raise UserError(f"{_get_it(source, config, split, True)} ({text})") from exc
            raise UserError(f"dataset '{source}' could not be loaded: {text}") from exc
        from_cache = isinstance(builder, Cache)
        _check_revision(source, builder, from_cache)
        chosen = _choose_split(source, split, list(builder.info.splits or {}))
        table = builder.as_dataset(split=chosen)
    return HubDataset(source=source, config=builder.config.name, split=chosen,
                      revision=str(builder.hash) if builder.hash else None, table=table)
