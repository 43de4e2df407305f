"""The lanes' scratch directories: removed when the pool shuts down, and when their harness died
without shutting down (SIGKILL, ``os._exit``), by the next pool on the machine — never while
their harness lives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from critiquelab.eval import execution
from critiquelab.eval.sandbox.limits import Limits
from critiquelab.eval.sandbox.pool import LANE_PREFIX, SandboxPool, sweep_abandoned_lanes

JOB = {"kind": "calls", "program": "def f():\n    return 1\n", "entry_point": "f", "calls": [""],
       "timeout_s": 5.0}
ROOT = str(Path(__file__).resolve().parents[2])


def _lanes(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"{LANE_PREFIX}*"))


def _killed_harness(tmpdir: Path) -> None:
    """A harness process that scores one job, then dies by SIGKILL: no ``atexit``, no cleanup."""
    script = (
        f"import os, signal, sys; sys.path.insert(0, {ROOT!r})\n"
        "from critiquelab.eval.sandbox.pool import SandboxPool\n"
        "from critiquelab.eval.sandbox.limits import Limits\n"
        f"pool = SandboxPool({execution.isolation_level()!r}, workers=1, limits=Limits())\n"
        f"assert pool.run({JOB!r})['outcomes'][0]['kind'] == 'returned'\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(tmpdir)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr


def test_a_dead_harness_leaves_a_lane_the_next_pool_sweeps(sandbox_tmpdir, monkeypatch):
    _killed_harness(sandbox_tmpdir)
    assert len(_lanes(sandbox_tmpdir)) == 1  # what the kill left behind
    monkeypatch.setattr(tempfile, "tempdir", str(sandbox_tmpdir))
    pool = SandboxPool(execution.isolation_level(), workers=1, limits=Limits())
    try:
        assert _lanes(sandbox_tmpdir) == []  # swept as the pool was made, before any lane of its own
    finally:
        pool.shutdown()


def test_a_live_lane_is_never_swept_and_shutdown_removes_it(sandbox_tmpdir, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(sandbox_tmpdir))
    pool = SandboxPool(execution.isolation_level(), workers=1, limits=Limits())
    try:
        assert pool.run(dict(JOB))["outcomes"][0]["kind"] == "returned"
        (lane,) = _lanes(sandbox_tmpdir)
        assert sweep_abandoned_lanes(str(sandbox_tmpdir)) == 0
        assert lane.is_dir()
    finally:
        pool.shutdown()
    assert _lanes(sandbox_tmpdir) == []


def test_what_is_not_an_abandoned_lane_of_ours_is_left_alone(sandbox_tmpdir):
    """A directory of the same prefix without a claim (another tool's, or a lane being made this
    instant), a file of that name, and a symlink to a dead lane all stay."""
    unclaimed = sandbox_tmpdir / f"{LANE_PREFIX}unclaimed"
    unclaimed.mkdir()
    (sandbox_tmpdir / f"{LANE_PREFIX}file").write_text("x")
    elsewhere = sandbox_tmpdir / "elsewhere"
    elsewhere.mkdir()
    _killed_harness(elsewhere)
    (dead,) = _lanes(elsewhere)
    (sandbox_tmpdir / f"{LANE_PREFIX}link").symlink_to(dead)
    assert sweep_abandoned_lanes(str(sandbox_tmpdir)) == 0
    assert unclaimed.is_dir() and dead.is_dir() and len(_lanes(sandbox_tmpdir)) == 3
    assert sweep_abandoned_lanes(str(elsewhere)) == 1 and not dead.exists()
