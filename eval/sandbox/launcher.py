"""The trusted side's handle on one sandbox server process.

Why a class of its own: the checker must survive anything the sandbox does (die, hang, send
half a frame), so every read has a deadline and every failure stops the server, to be started
afresh on the next request, and is reported as :class:`SandboxFailure`.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import struct
import subprocess
import time

from critiquelab.eval.sandbox import codec
from critiquelab.eval.sandbox.isolation import LaunchSpec, launch_spec
from critiquelab.eval.sandbox.limits import Limits

_BUDGET = struct.Struct(">d")
GRACE_S = 3.0  # how long past a budget the server may take to answer before we call it stuck
_MAX_REPLY = 1 << 30


class SandboxFailure(Exception):
    """The sandbox server died or stopped answering (restarted before the next request)."""


class Sandbox:
    """One sandbox server process, started lazily and restarted after any failure."""

    def __init__(self, level: str, limits: Limits) -> None:
        self.level = level
        self.limits = limits
        self.proc: subprocess.Popen[bytes] | None = None
        self.spec: LaunchSpec | None = None

    def start(self) -> None:
        self.spec = launch_spec(self.level, self.limits.disk_mb)
        self.proc = subprocess.Popen(
            self.spec.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
            env=self.spec.env(), preexec_fn=self.spec.preexec, start_new_session=True,
            close_fds=True, cwd="/",
        )
        assert self.proc.stdout is not None
        if self._read(time.monotonic() + 30.0) != b"ready":
            self.stop()
            raise SandboxFailure("sandbox server did not start")

    def stop(self) -> None:
        """Kill the server and everything in its session (bwrap takes its namespace down)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None
        if self.spec is not None:
            for path in self.spec.cleanup_dirs:
                shutil.rmtree(path, ignore_errors=True)
            self.spec = None

    def request(self, op: bytes, budget: float, payload: bytes = b"") -> tuple[bytes, bytes]:
        """Send one request; return (reply kind, body). Raises :class:`SandboxFailure`."""
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            codec.write_frame(self.proc.stdin.fileno(), op + _BUDGET.pack(budget) + payload)
            frame = self._read(time.monotonic() + max(budget, 0.0) + GRACE_S)
        except (OSError, codec.FrameError, SandboxFailure) as exc:
            self.stop()
            raise SandboxFailure(str(exc) or type(exc).__name__) from exc
        return frame[:1], frame[1:]

    def _read(self, deadline: float) -> bytes:
        """Read one frame, giving up at ``deadline`` even if the server sent half a frame."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        data = b""
        need = 4
        while len(data) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise SandboxFailure("sandbox server stopped answering")
            chunk = os.read(fd, need - len(data))
            if not chunk:
                raise SandboxFailure("sandbox server exited")
            data += chunk
            if need == 4 and len(data) == 4:
                need = 4 + struct.unpack(">I", data)[0]
                if need > _MAX_REPLY:
                    raise SandboxFailure("oversized frame from sandbox server")
        return data[4:]
