"""Where the set-up puts the ``llama-server`` it builds, and what that build recorded.

``scripts/build_llama_server.sh`` builds llama.cpp's server from the llama.cpp tree vendored in
the pinned llama-cpp-python sdist, with ``-march=native``. The binary is cached per
llama-cpp-python version, per build recipe and per CPU (a digest of the CPU's feature flags), so
a second set-up does not rebuild and a cache directory shared between machines never runs a binary built for
another CPU's instruction set. Run as ``python -m critiquelab.experiments.serving.server_build`` it prints the
path the build must produce.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
from dataclasses import dataclass
from pathlib import Path

from critiquelab.experiments.paths import model_cache_dir

BUILD_RECORD = "build.json"
# Names the build script's recipe (its flags) in the cache path, so a changed recipe rebuilds
# instead of reusing a binary built the old way. "noamx": built without AMX kernels.
BUILD_RECIPE = "noamx"


def cpu_flags_digest(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """Short digest of the machine type and the CPU's feature flags: what ``-march=native``
    compiled for."""
    flags = ""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(("flags", "Features")):  # x86 / ARM
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        pass  # no /proc: the machine type alone keys the cache
    return hashlib.sha256(f"{platform.machine()}\n{flags}".encode()).hexdigest()[:12]


def binary_path() -> Path:
    """Where the build for the installed llama-cpp-python version, this CPU and the current
    recipe lives."""
    version = importlib.metadata.version("llama-cpp-python")
    build = f"{version}-{BUILD_RECIPE}-{cpu_flags_digest()}"
    return model_cache_dir() / "llama-server" / build / "llama-server"


@dataclass(frozen=True)
class BuiltServer:
    """A llama-server built by the set-up, with what its build recorded."""

    path: Path
    sdist: str  # the llama-cpp-python sdist its llama.cpp tree came from
    llama_cpp_commit: str  # the vendored llama.cpp commit (from the sdist's changelog)


def find_built_server(path: Path | None = None) -> BuiltServer | None:
    """The set-up's llama-server, or None when it was not built (or its build record is
    unreadable: a half-written build is not used)."""
    path = path or binary_path()
    try:
        record = json.loads((path.parent / BUILD_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not path.is_file() or not isinstance(record, dict):
        return None
    return BuiltServer(
        path, str(record.get("sdist", "unknown")), str(record.get("llama_cpp_commit", "unknown"))
    )


if __name__ == "__main__":
    print(binary_path())
