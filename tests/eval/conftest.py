"""Shared fixtures for the sandbox tests: host sentinels and a leftover-process census.

The secret below is put in the environment at import time, before any sandbox lane starts,
so that a leak through the environment would really reach the candidate if the allow-list
were missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

SECRET = "sk-critiquelab-test-secret-4f1c9a"
os.environ["CRITIQUELAB_TEST_API_KEY"] = SECRET

_ADD_TEST = "def check(candidate):\n    assert candidate(1, 2) == 3\n"


def sandbox_strays() -> list[str]:
    """Processes left by candidates: unprivileged (sandbox) uids that are neither a bwrap
    launcher nor a sandbox server (pid 1 of its namespace). Must be empty between samples."""
    strays = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "0").split()[0])
        state = fields.get("State", "").strip()
        if uid < 200_000 or state.startswith("Z"):
            continue
        ns_pid = fields.get("NSpid", "").split()[-1:]
        if cmdline.startswith("bwrap ") or ns_pid == ["1"]:
            continue
        strays.append(f"{entry.name} {cmdline[:80]}")
    return strays


def processes_matching(marker: str) -> list[str]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(f"{entry.name} {cmdline[:80]}")
    return found


class Census:
    """Process look-ups for tests (a fixture, since test modules cannot import a conftest)."""

    strays = staticmethod(sandbox_strays)
    matching = staticmethod(processes_matching)
    secret = SECRET


@pytest.fixture
def census() -> Census:
    return Census()


@pytest.fixture(scope="session")
def sentinel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host directory with a file candidates will try to read, change and delete."""
    path = tmp_path_factory.mktemp("sentinel")
    (path / "sentinel.txt").write_text("untouched")
    os.chmod(path, 0o777)  # even world-writable: at the bwrap level it is simply not visible
    os.chmod(path / "sentinel.txt", 0o666)
    return path


@pytest.fixture
def host_unharmed(sentinel_dir: Path) -> Iterator[Path]:
    """After the test: sentinel intact, nothing of the candidate running, harness working."""
    from critiquelab.eval.execution import run_program

    yield sentinel_dir
    assert (sentinel_dir / "sentinel.txt").read_text() == "untouched"
    assert sorted(p.name for p in sentinel_dir.iterdir()) == ["sentinel.txt"]
    assert sandbox_strays() == []
    assert run_program("def add(a, b):\n    return a + b\n", _ADD_TEST, "add", timeout_s=5).passed
