"""Serve a GGUF file with llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

One server per run, started before the first LM call and stopped when the run ends (normal
exit, error, Ctrl-C). If the harness itself is killed, the kernel stops the server too
(``PR_SET_PDEATHSIG``), so no orphan keeps the port and the CPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from eval.errors import UserError

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class LocalModelServer:
    """Context manager around ``python -m llama_cpp.server``."""

    def __init__(
        self,
        model_path: Path,
        alias: str,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        log_path: Path | None = None,
        startup_timeout_s: float = 180.0,
    ) -> None:
        self.model_path = model_path
        self.alias = alias
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def api_base(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalModelServer:
        self.port = free_port()
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path), "--model_alias", self.alias,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
        ]
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        finally:
            if self.log_path:
                log.close()  # type: ignore[union-attr]
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"{self.api_base}/models"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                self.stop()
                where = f"; see {self.log_path}" if self.log_path else ""
                raise UserError(f"the local model server exited during start-up{where}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.25)
        self.stop()
        raise UserError(f"the local model server did not become healthy in {self.startup_timeout_s:.0f}s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            # Short: uvicorn's graceful shutdown would let a request in flight finish generating
            # (up to a minute), and the server holds nothing worth waiting for.
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
