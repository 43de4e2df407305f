"""Per-problem checkpoints, so an interrupted experiment resumes without redoing or
double-counting work.

One append-only JSONL file per pipeline × seed. Each finished problem is one line, flushed
and fsynced before the next problem is reported done. A line torn by a kill is dropped on
the next open; a task recorded twice keeps its first record.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from eval.results import ProblemResult


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


class CheckpointStore:
    """Checkpoints of one experiment configuration, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()

    def _path(self, pipeline: str, seed: int) -> Path:
        return self.directory / f"{_slug(pipeline)}__seed{seed}.jsonl"

    def load(self, pipeline: str, seed: int) -> dict[str, ProblemResult]:
        path = self._path(pipeline, seed)
        done: dict[str, ProblemResult] = {}
        if not path.exists():
            return done
        for line in path.read_text().splitlines():
            try:
                result = ProblemResult.model_validate_json(line)
            except ValueError:
                continue  # a torn final line from a killed run
            done.setdefault(result.task_id, result)
        return done

    def append(self, result: ProblemResult) -> None:
        path = self._path(result.pipeline, result.seed)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._drop_torn_tail(path)
            with path.open("a") as handle:
                handle.write(result.model_dump_json() + "\n")
                handle.flush()
                os.fsync(handle.fileno())

    @staticmethod
    def _drop_torn_tail(path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        with path.open("rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
            data = handle.seek(0) or handle.read()
            handle.truncate(data.rfind(b"\n") + 1)
