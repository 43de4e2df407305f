"""Where a candidate's stdout and stderr go: pipes the fork server drains, counts and discards.

Why pipes and not a file: output volume must never decide a verdict (issue #15). A file would
need RLIMIT_FSIZE to stay bounded, and hitting that limit kills the candidate; a pipe is not
subject to it. The server reads both pipes continuously while the candidate runs and keeps
nothing but the byte counts, so its memory stays constant whatever the candidate prints, and a
candidate that never stops printing still ends at its wall-clock limit. No verdict is read from
these pipes: answers travel on the child's own reply channel, so printed text cannot forge one.

Between requests (while the trusted checker runs test code) nobody reads: a candidate thread
that keeps printing then blocks on the full pipe, which harms only the candidate. The counts are
what reached the pipes: text still in the candidate's own buffers when it is killed is lost.

Standard library only: loaded by the sandbox server next to ``codec.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

STREAMS = ("stdout", "stderr")
_PIPE_BYTES = 1 << 20  # a larger pipe means fewer wake-ups while a candidate floods output
_READS_PER_WAKEUP = 16  # bounded, so the server gets back to its deadline and reply checks
_FINAL_READS = 64  # after the kill: what is left in the pipe (a survivor at weak levels aside)


class OutputSink:
    """The two output pipes of the current candidate child, and how much came through each."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(STREAMS, 0)
        self._open: dict[int, str] = {}  # read end -> stream name
        self._scratch = bytearray(_PIPE_BYTES)

    def open(self) -> tuple[int, int]:
        """Fresh pipes for a new child; returns the write ends (stdout, stderr) for the child."""
        self.close()
        self.counts = dict.fromkeys(STREAMS, 0)
        write_ends = []
        for name in STREAMS:
            read_end, write_end = os.pipe()
            with contextlib.suppress(OSError):  # over the user's pipe quota: default size
                fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            os.set_blocking(read_end, False)
            self._open[read_end] = name
            write_ends.append(write_end)
        return write_ends[0], write_ends[1]

    def read_ends(self) -> list[int]:
        return list(self._open)

    def drain(self, fd: int, max_reads: int = _READS_PER_WAKEUP) -> bool:
        """Read and discard what is waiting on ``fd``; False once it is closed (every writer
        gone), after which the caller stops polling it."""
        name = self._open.get(fd)
        if name is None:
            return False
        for _ in range(max_reads):
            try:
                size = os.readv(fd, [self._scratch])
            except BlockingIOError:
                return True
            except OSError:
                size = 0
            if size == 0:
                del self._open[fd]
                os.close(fd)
                return False
            self.counts[name] += size
        return True

    def close(self) -> None:
        """Count what the (already killed) candidate left in the pipes, then close them."""
        for fd in self.read_ends():
            if self.drain(fd, _FINAL_READS):
                del self._open[fd]
                os.close(fd)
