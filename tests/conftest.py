"""Shared fixtures. Tests mirror the package layout: tests/eval, tests/experiments, …"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Offline defaults before any library import reaches for the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


def pytest_configure(config: pytest.Config) -> None:
    """TextGrad writes a prompt log wherever $TEXTGRAD_LOG_DIR says once imported: a directory
    of this session's, removed at its end."""
    os.environ.setdefault("TEXTGRAD_LOG_DIR", tempfile.mkdtemp(prefix="critiquelab-test-textgrad-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    path = os.environ.get("TEXTGRAD_LOG_DIR", "")
    if Path(path).name.startswith("critiquelab-test-textgrad-"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data directory for one test."""
    path = tmp_path / "home"
    monkeypatch.setenv("CRITIQUELAB_HOME", str(path))
    return path


@pytest.fixture
def sandbox_tmpdir() -> Iterator[Path]:
    """A temporary directory the sandbox's own uid can traverse, for TMPDIR (tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="critiquelab-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def humaneval_problems() -> list:
    from critiquelab.eval.datasets import load_problems

    return load_problems()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` take minutes each: run only when CRITIQUELAB_SLOW_TESTS=1, so the
    default run stays within CI's time."""
    if os.environ.get("CRITIQUELAB_SLOW_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="slow; set CRITIQUELAB_SLOW_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
