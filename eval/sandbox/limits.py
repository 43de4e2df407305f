"""Resource limits applied to every candidate process.

Why these numbers: HumanEval-style functions need little (a few MB, well under a second), so
the limits sit far above honest use and far below what would hurt a 2-core, 24 GB machine
running one sandbox per core. The wall-clock timeout is separate (per call of
``run_program``); ``cpu_s`` here is only a backstop behind it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Limits:
    """Per-candidate limits. Everything here is enforced inside the sandbox."""

    memory_mb: int = 1024
    """RLIMIT_AS of the candidate process: allocation beyond it raises MemoryError."""
    file_bytes: int = 1 << 20
    """RLIMIT_FSIZE: the largest file the candidate may write. Its stdout/stderr are pipes the
    sandbox drains and discards, so how much it prints is not limited (nor kept)."""
    disk_mb: int = 64
    """Size of the sandbox's private tmpfs (all files the candidate writes)."""
    nproc: int = 32
    """RLIMIT_NPROC for the sandbox uid: stops fork bombs (root ignores it, so candidates never
    run as root)."""
    nofile: int = 64
    """RLIMIT_NOFILE."""
    return_bytes: int = 8 << 20
    """Largest serialised return value accepted from the candidate."""
    cpu_grace_s: int = 2
    """RLIMIT_CPU is set to the wall timeout plus this, as a backstop to the wall-clock kill."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        return cls(**data)


DEFAULT_LIMITS = Limits()
