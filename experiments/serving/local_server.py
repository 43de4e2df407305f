"""Serve a GGUF file on 127.0.0.1 with llama.cpp's ``llama-server`` (parallel slots) or
llama-cpp-python's OpenAI-compatible server (one request at a time, the fallback).

One server per run, started before the first LM call and stopped when the run ends (normal
exit, error, Ctrl-C). If the harness itself is killed, the kernel stops the server too
(``PR_SET_PDEATHSIG``), so no orphan keeps the port and the CPU.

``llama-server`` serves ``slots`` requests at once with continuous batching, each slot with the
spec's context window and its own prompt cache, so the agents of a problem keep their shared
prefixes while their requests interleave. Which server answered never changes the LM cache key
(the model file's hash): a cached answer replays whichever server made it.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

from critiquelab.core.errors import UserError
from critiquelab.experiments.serving.server_build import BuiltServer
from critiquelab.experiments.serving.speculation import Speculation, speculation_args

ServerChoice = Literal["auto", "llama-server", "llama-cpp-python"]

# Host memory for llama-server's prompt cache (slot states kept after their requests end, so a
# later request with the same prefix reuses it on any slot). Its default, 8 GiB, is too much to
# take on a shared machine; 1 GiB holds ~80 prompts of 1k tokens of the 0.5B model.
PROMPT_CACHE_MIB = 1024
# Reuse matching chunks of at least this many tokens by shifting the KV cache, beyond the
# common prefix (a prompt whose middle matches an earlier one).
CACHE_REUSE_TOKENS = 256

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class Backend:
    """The server program that will serve the model: its name and, for llama-server, the build."""

    name: Literal["llama-server", "llama-cpp-python"]
    build: BuiltServer | None = None

    @property
    def version(self) -> str:
        if self.build is not None:
            return f"llama.cpp {self.build.llama_cpp_commit} (vendored in {self.build.sdist})"
        return f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}"


def select_backend(choice: ServerChoice, built: BuiltServer | None) -> Backend:
    """``auto``: llama-server when the set-up built it, else llama-cpp-python; an explicit
    choice is honoured, and an explicit llama-server that was not built is an input error."""
    if choice == "llama-cpp-python" or (choice == "auto" and built is None):
        return Backend("llama-cpp-python")
    if built is None:
        raise UserError(
            "model.server is 'llama-server', but it was not built on this machine (scripts/"
            "build_llama_server.sh builds it); use 'auto' or 'llama-cpp-python'"
        )
    return Backend("llama-server", built)


class LocalModelServer:
    """Context manager around one local server process serving ``model_path`` as ``alias``."""

    def __init__(
        self,
        model_path: Path,
        alias: str,
        *,
        backend: Backend,
        n_ctx: int = 4096,
        slots: int = 1,
        n_threads: int | None = None,
        log_path: Path | None = None,
        startup_timeout_s: float = 180.0,
        speculation: Speculation = "off",
        draft_model: Path | None = None,
    ) -> None:
        self.model_path = model_path
        self.alias = alias
        self.backend = backend
        self.n_ctx = n_ctx
        # llama-cpp-python serves one request at a time whatever it is asked.
        self.slots = slots if backend.name == "llama-server" else 1
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        if speculation != "off" and backend.name != "llama-server":
            raise UserError(
                f"model.speculative is '{speculation}', but only llama-server speculates and the model "
                "is served by llama-cpp-python here; use 'off', or build llama-server (scripts/setup.sh)"
            )
        self.speculation = speculation
        self.speculation_args = speculation_args(speculation, draft_model)
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def api_base(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def params(self) -> dict[str, str]:
        """What served the run, for its MLflow params."""
        served = {
            "serving.server": self.backend.name, "serving.version": self.backend.version,
            "serving.slots": str(self.slots), "serving.threads": str(self.n_threads),
            "serving.speculative": self.speculation,
        }
        if self.speculation_args:
            served["serving.speculative_args"] = " ".join(self.speculation_args)
        return served

    def command(self, port: int) -> list[str]:
        threads = str(self.n_threads)
        if self.backend.build is not None:
            return [
                str(self.backend.build.path),
                "--model", str(self.model_path), "--alias", self.alias,
                "--host", "127.0.0.1", "--port", str(port),
                # llama-server splits --ctx-size across its slots: each gets the spec's window.
                "--ctx-size", str(self.n_ctx * self.slots), "--parallel", str(self.slots),
                "--no-kv-unified", "--cont-batching",
                "--threads", threads, "--threads-batch", threads,
                "--cache-ram", str(PROMPT_CACHE_MIB), "--cache-reuse", str(CACHE_REUSE_TOKENS),
                "--no-webui", "--metrics",
                *self.speculation_args,
            ]
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path), "--model_alias", self.alias,
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(self.n_ctx), "--n_threads", threads,
        ]

    def _health_url(self) -> str:
        # llama-server answers /health with 503 until the model is loaded; llama-cpp-python's
        # server loads the model before it listens.
        if self.backend.name == "llama-server":
            return f"http://127.0.0.1:{self.port}/health"
        return f"{self.api_base}/models"

    def start(self) -> LocalModelServer:
        self.port = free_port()
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                self.command(self.port), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
            )
        finally:
            if self.log_path:
                log.close()  # type: ignore[union-attr]
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = self._health_url()
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
