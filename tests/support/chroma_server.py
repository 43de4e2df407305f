"""A real ChromaDB server (`chroma run`) on a free local port, for tests of the HTTP client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def chroma_server(path: Path, start_timeout_s: float = 30.0) -> Iterator[str]:
    """The server's URL while it serves the store in ``path``; the test is skipped when the
    server does not start within ``start_timeout_s``."""
    port = free_port()
    launcher = "import sys; from chromadb.cli.cli import app; sys.argv[0] = 'chroma'; app()"
    server = subprocess.Popen(
        [sys.executable, "-c", launcher, "run", "--path", str(path), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                socket.create_connection(("localhost", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.skip("could not start a local `chroma run` server")
                time.sleep(0.2)
        yield f"http://localhost:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)
