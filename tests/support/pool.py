"""Helpers for the message-pool tests: messages and a cheap embedder."""

from __future__ import annotations

import hashlib
import threading

from critiquelab.runtime.pool.messages import Message


def make_message(**fields: object) -> Message:
    """A message with sensible defaults, so each test spells out only what it is about."""
    defaults: dict[str, object] = {
        "task_id": "HumanEval/0",
        "thread_id": "t0",
        "intent": "critique",
        "sender": "coder",
    }
    defaults.update(fields)
    return Message(**defaults)  # type: ignore[arg-type]


class HashEmbedder:
    """A deterministic 8-d embedding: tests of persistence need a store, not semantics.

    ``delay`` simulates a slow model; ``fail`` makes every call raise (writer error paths).
    """

    def __init__(self, delay: float = 0.0, fail: bool = False):
        self.delay = delay
        self.fail = fail
        self.calls = 0
        self.threads: set[str] = set()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("embedder exploded")
        if self.delay:
            threading.Event().wait(self.delay)
        return [[b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in texts]
