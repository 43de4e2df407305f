"""Harness-side pool of lanes: each lane is one trusted checker process owning one sandbox.

Why processes and not threads: the trusted test code must run outside the harness (tests
reseed ``random``, import modules, and may spin on a bad value), and a process can be killed
when it overruns, a thread cannot. Lanes start lazily, are reused across jobs (the sandbox
forks a fresh candidate per sample, so reuse leaks nothing between samples), and are
replaced after any failure. ``shutdown()`` (also registered with ``atexit``) kills them all.

A lane's scratch directory is claimed with an ``flock`` held for the lane's life, so a harness
that dies without its ``atexit`` (SIGKILL, ``os._exit``, a Ray worker taken down with its
children) leaves a directory that the next pool in any process on the machine sweeps away.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import json
import os
import queue
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from critiquelab.eval.sandbox import codec
from critiquelab.eval.sandbox.limits import Limits

_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from critiquelab.eval.sandbox.checker import main; main()"
)
HARD_GRACE_S = 10.0  # past the job's own timeout before a checker counts as hung
LANE_PREFIX = "critiquelab-lane-"
_CLAIM = ".claim"  # the file in a lane's directory whose lock says its harness is alive


def default_workers() -> int:
    """One lane per usable core: each sample is CPU-bound and single-threaded."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Lane:
    """One checker process. Not thread-safe: the pool hands a lane to one thread at a time."""

    def __init__(self, level: str, limits: Limits) -> None:
        self.level, self.limits = level, limits
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: str | None = None
        self._claim: int | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        # Every file the checker and its sandbox create lives under this directory (TMPDIR),
        # so even a checker killed with SIGKILL leaves nothing behind once we remove it.
        self.dir = tempfile.mkdtemp(prefix=LANE_PREFIX)
        os.chmod(self.dir, 0o755)  # the sandbox uid must reach the staged server files
        # Locked before it takes the name a sweep looks for, so no sweep finds it unlocked.
        claiming = os.path.join(self.dir, _CLAIM + ".new")
        self._claim = os.open(claiming, os.O_CREAT | os.O_RDONLY, 0o600)
        fcntl.flock(self._claim, fcntl.LOCK_EX)  # released by the kernel however we end
        os.rename(claiming, os.path.join(self.dir, _CLAIM))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": self.dir}
        return subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, _ROOT, self.level,
             json.dumps(self.limits.to_dict())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True,
            close_fds=True,
        )

    def kill(self, graceful: bool = False) -> None:
        """Stop the checker (``graceful``: let it shut its sandbox down first) and clean up."""
        if self.proc is not None:
            if graceful and self.proc.stdin is not None:
                self.proc.stdin.close()  # end of jobs: the checker stops its sandbox and exits
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=2.0)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # the checker and its sandbox server
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None and not stream.closed:
                    stream.close()
            self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if self._claim is not None:
            os.close(self._claim)
            self._claim = None

    def run(self, job: dict[str, Any], hard_timeout: float) -> dict[str, Any]:
        """Send a job, wait for its result; a hung or dead checker yields a verdict, never hangs."""
        if self.proc is None:
            self.proc = self._start()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            codec.write_frame(self.proc.stdin.fileno(), json.dumps(job).encode())
            verdict: dict[str, Any] = json.loads(self._read(self.proc.stdout.fileno(), hard_timeout))
            return verdict
        except TimeoutError:
            self.kill()
            return {"status": "timed_out", "reason": "timeout",
                    "detail": "checker overran the wall-clock limit; killed", "outcomes": []}
        except (OSError, EOFError, ValueError) as exc:
            self.kill()
            return {"status": "error", "reason": "sandbox", "detail": f"checker failed: {exc}",
                    "outcomes": []}

    @staticmethod
    def _read(fd: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        data, need = b"", 4
        while len(data) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(need - len(data), 1 << 20))
            if not chunk:
                raise EOFError("checker exited")
            data += chunk
            if need == 4 and len(data) == 4:
                need += struct.unpack(">I", data)[0]
        return data[4:]


class SandboxPool:
    """A fixed number of lanes shared by any number of caller threads."""

    def __init__(self, level: str, workers: int | None = None,
                 limits: Limits | None = None) -> None:
        self.level = level
        self.limits = limits or Limits()
        self.size = workers or default_workers()
        _sweep_once(tempfile.gettempdir())
        self._free: queue.SimpleQueue[Lane] = queue.SimpleQueue()
        self._lanes = [Lane(level, self.limits) for _ in range(self.size)]
        for lane in self._lanes:
            self._free.put(lane)
        self._closed = False

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise RuntimeError("sandbox pool is shut down")
        lane = self._free.get()
        try:
            budget = float(job["timeout_s"]) * max(1, len(job.get("calls", ())) or 1)
            return lane.run(job, budget + HARD_GRACE_S)
        finally:
            self._free.put(lane)

    def run_many(self, jobs: Sequence[dict[str, Any]], workers: int | None = None
                 ) -> list[dict[str, Any]]:
        threads = min(workers or self.size, self.size, max(1, len(jobs)))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sandbox") as pool:
            return list(pool.map(self.run, jobs))

    def shutdown(self, graceful: bool = True) -> None:
        """Stop every lane; ``graceful`` lets each checker stop its sandbox first (up to 2 s)."""
        self._closed = True
        for lane in self._lanes:
            lane.kill(graceful=graceful)


def sweep_abandoned_lanes(directory: str) -> int:
    """Remove the lane directories under ``directory`` whose harness has died; how many.

    A live lane's claim is locked by its harness; a lane of another user, or one without a claim
    (being created this instant), is left alone."""
    removed = 0
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.startswith(LANE_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                    continue
                claim = os.open(os.path.join(entry.path, _CLAIM), os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its harness still holds it
            finally:
                os.close(claim)
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed


@functools.cache
def _sweep_once(directory: str) -> None:
    """Sweep once per process and directory: lanes are only ever abandoned by a dead process."""
    sweep_abandoned_lanes(directory)


_pools: dict[tuple[str, Limits], SandboxPool] = {}
_lock = threading.Lock()


def get_pool(level: str, limits: Limits) -> SandboxPool:
    """The process-wide pool for these settings, created on first use."""
    with _lock:
        pool = _pools.get((level, limits))
        if pool is None:
            pool = _pools[(level, limits)] = SandboxPool(level, limits=limits)
        return pool


def shutdown(graceful: bool = True) -> None:
    """Stop every lane (checker and sandbox processes). Safe to call more than once."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(graceful)


atexit.register(shutdown)
