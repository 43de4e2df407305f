"""The fork server that runs *inside* the sandbox (untrusted side of the boundary).

Why a fork server: starting an interpreter per sample costs tens of milliseconds; forking a
preloaded one costs about one. Each sample gets a fresh forked child; after the sample every
process the candidate created is killed and the writable directories are wiped, so nothing of
one sample survives into the next.

Nothing here is trusted by the checker. The server only relays: requests from the trusted
checker go to the candidate child, the child's answers come back as opaque bytes that the
checker parses strictly. A candidate that subverts its own child can at most answer with data
of its choosing, which is what an honest function does too.

The candidate's stdout and stderr are pipes this server drains and discards while it waits
for an answer (``output_sink.py``): how much a candidate prints never decides its verdict.

Run as a script by the system interpreter (``python3.11 -I -S server.py``): standard library
only, plus ``codec.py`` and ``output_sink.py`` from the same directory.

Wire format (checker -> server): 1-byte op, 8-byte float budget in seconds, payload.
  L load   payload: JSON {"program", "entry", "limits", "timeout"}
  C call   payload: encoded argument list
  E eval   payload: source of an argument list (``call_function``)
  X end    kill every candidate process, wipe the work area
Replies (server -> checker): ``R`` + the child's payload, ``T`` (budget exhausted, child
killed), ``D`` + JSON {"code"|"signal"} (child died), ``O`` + JSON {"stdout", "stderr"} (ok
after ``X``: bytes the sample's candidate printed to each, all discarded).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same files, under the names a type checker finds them by
    import ctypes

    from critiquelab.eval.sandbox import codec
    from critiquelab.eval.sandbox.output_sink import OutputSink
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import codec  # stdlib-only sibling modules, found via the line above
    from output_sink import OutputSink

_BUDGET = struct.Struct(">d")
IN_FD, OUT_FD = 10, 11  # the checker channel, moved away from 0/1 so no print can touch it
CHILD_REQ, CHILD_REP = 3, 4  # the candidate child's end of its private pipe pair
PRELOAD = (
    "math", "re", "string", "collections", "itertools", "functools", "heapq", "bisect",
    "typing", "random", "fractions", "decimal", "statistics", "hashlib", "json", "copy",
    "operator", "datetime", "array", "cmath", "textwrap", "unicodedata", "numbers",
)


@functools.cache
def _libc() -> ctypes.CDLL:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    _libc().prctl(option, value, 0, 0, 0)


class Server:
    def __init__(self, sweep: str, workdir: str, extra_wipe: list[str]) -> None:
        self.sweep_mode = sweep  # "ns": we are pid 1 of our own pid namespace; "uid": unique
        self.workdir = workdir  # uid; "pgroup": only the child's process group can be killed
        self.wipe_dirs = [workdir, *extra_wipe]
        self.child = 0
        self.pidfd = -1
        self.to_child = self.from_child = -1
        self.buf = b""
        self.output = OutputSink()

    # ------------------------------------------------------------------ child lifecycle
    def spawn(self, request: dict[str, Any]) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_w, err_w = self.output.open()
        pid = os.fork()
        if pid == 0:  # candidate child: never returns
            try:
                os.close(req_w)
                os.close(rep_r)
                _child_main(request, (req_r, rep_w, out_w, err_w), self)
            finally:
                os._exit(70)
        for fd in (req_r, rep_w, out_w, err_w):
            os.close(fd)
        self.child, self.to_child, self.from_child, self.buf = pid, req_w, rep_r, b""
        os.set_blocking(rep_r, False)
        self.pidfd = os.pidfd_open(pid)

    def sweep(self) -> None:
        """Kill every candidate process and reap; wipe the writable directories."""
        for fd in (self.to_child, self.from_child, self.pidfd):
            if fd >= 0:
                os.close(fd)
        self.to_child = self.from_child = self.pidfd = -1
        if self.sweep_mode in ("ns", "uid"):
            # kill(-1) reaches every process we may signal except ourselves (and pid 1): in
            # our own pid namespace, or under a uid no other process uses, that is exactly the
            # candidate's processes, including daemonised grandchildren.
            for _ in range(100):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
                self._reap(block=True)
        elif self.child:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.child, signal.SIGKILL)
        self._reap(block=True)
        self.child = 0
        self.output.close()  # after the kill: no writer left to keep the pipes full
        for top in self.wipe_dirs:
            for name in os.listdir(top):
                path = os.path.join(top, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(path)

    def _reap(self, block: bool) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    # ------------------------------------------------------------------ talking to the child
    def forward(self, payload: bytes, budget: float, max_bytes: int) -> bytes:
        if payload:
            # If the child is gone or stopped reading, the wait below says which.
            with contextlib.suppress(OSError):
                codec.write_frame(self.to_child, payload)
        return self.await_reply(time.monotonic() + budget, max_bytes)

    def await_reply(self, deadline: float, max_bytes: int) -> bytes:
        poller = select.poll()
        poller.register(self.from_child, select.POLLIN)
        poller.register(self.pidfd, select.POLLIN)
        for fd in self.output.read_ends():
            poller.register(fd, select.POLLIN)
        pipe_open = True
        while True:
            frame = self._take_frame(max_bytes)
            if frame is not None:
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.sweep()
                return b"T"
            events = dict(poller.poll(max(1, int(remaining * 1000) + 1)))
            for fd in self.output.read_ends():
                if fd in events and not self.output.drain(fd):
                    poller.unregister(fd)
            if pipe_open and self.from_child in events:
                pipe_open = self._fill()
                if not pipe_open:
                    poller.unregister(self.from_child)
                continue
            if self.pidfd in events:
                self._fill()
                frame = self._take_frame(max_bytes)
                if frame is not None:
                    return frame
                return b"D" + json.dumps(self._death()).encode()

    def _fill(self) -> bool:
        try:
            while True:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    return False
                self.buf += chunk
        except BlockingIOError:
            return True

    def _take_frame(self, max_bytes: int) -> bytes | None:
        if len(self.buf) < 4:
            return None
        (size,) = struct.unpack(">I", self.buf[:4])
        if size > max_bytes:
            return b'R["toolarge","reply of %d bytes is over the limit"]' % size
        if len(self.buf) < 4 + size:
            return None
        frame, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
        return b"R" + frame

    def _death(self) -> dict[str, int]:
        info: dict[str, int] = {}
        try:
            _pid, status = os.waitpid(self.child, 0)
            if os.WIFSIGNALED(status):
                info["signal"] = os.WTERMSIG(status)
            else:
                info["code"] = os.WEXITSTATUS(status)
        except ChildProcessError:
            info["code"] = -1
        self.sweep()
        return info

    # ------------------------------------------------------------------ main loop
    def serve(self) -> None:
        codec.write_frame(OUT_FD, b"ready")
        while True:
            try:
                frame = codec.read_frame(IN_FD, 1 << 30)
            except codec.FrameError:
                return
            op, budget, payload = frame[:1], _BUDGET.unpack(frame[1:9])[0], frame[9:]
            if op == b"L":
                self.sweep()
                request = json.loads(payload)
                self.spawn(request)
                max_bytes = request["limits"]["return_bytes"] + 4096
                reply = self.await_reply(time.monotonic() + budget, max_bytes)
            elif op in (b"C", b"E"):
                if not self.child:
                    reply = b"D" + json.dumps({"code": -1}).encode()
                else:
                    reply = self.forward(op + payload, budget, 1 << 30)
            elif op == b"X":
                self.sweep()
                reply = b"O" + json.dumps(self.output.counts).encode()
            else:
                reply = b"Fbad op"
            codec.write_frame(OUT_FD, reply)


# ---------------------------------------------------------------------- the candidate child


def _child_main(request: dict[str, Any], fds: tuple[int, int, int, int], server: Server) -> None:
    limits = request["limits"]
    timeout = float(request["timeout"])
    os.setsid()
    _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the server
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the candidate's, as in any Python
    private = os.path.join(server.workdir, "w")
    os.mkdir(private, 0o700)
    req_fd, rep_fd, out_fd, err_fd = fds
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.dup2(req_fd, CHILD_REQ)
    os.dup2(rep_fd, CHILD_REP)
    os.closerange(CHILD_REP + 1, 1 << 16)  # the checker channel and everything else
    os.chdir(private)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": private, "TMPDIR": private,
                       "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"})
    mb = 1 << 20
    cpu = int(timeout) + 1 + int(limits["cpu_grace_s"])
    rlimits = [
        (resource.RLIMIT_AS, limits["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, limits["file_bytes"]),
        (resource.RLIMIT_NOFILE, limits["nofile"]),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, cpu),
    ]
    if server.sweep_mode != "pgroup":  # under a shared uid a low NPROC would hit others
        rlimits.append((resource.RLIMIT_NPROC, limits["nproc"]))
    for which, value in rlimits:
        resource.setrlimit(which, (value, value + 1 if which == resource.RLIMIT_CPU else value))
    _serve_candidate(request, limits["return_bytes"])


def _reply(obj: object) -> None:
    codec.write_frame(CHILD_REP, json.dumps(obj).encode())


def _candidate_line(exc: BaseException) -> int:
    """The line of the candidate's own source where ``exc`` last passed (0: none), so a repairer
    can be told where its code failed (Self-Debugging)."""
    line = 0
    try:
        frame = exc.__traceback__
        while frame is not None:
            if frame.tb_frame.f_code.co_filename == "<candidate>":
                line = frame.tb_lineno
            frame = frame.tb_next
    except BaseException:  # a candidate may hand over a forged traceback; the line is only a hint
        return 0
    return line if type(line) is int else 0


def _describe(exc: BaseException) -> list[str | int]:
    try:
        message = str(exc)
    except BaseException:  # a hostile __str__
        message = "<unprintable>"
    return ["exc", type(exc).__name__[:200], message[:2000], _candidate_line(exc)]


def _serve_candidate(request: dict[str, Any], return_bytes: int) -> None:
    namespace: dict[str, Any] = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        code = compile(request["program"], "<candidate>", "exec")
    except (SyntaxError, ValueError) as exc:  # ValueError: source with NUL bytes
        _reply(["syntax", f"{type(exc).__name__}: {exc}"[:2000]])
        return _idle()
    try:
        exec(code, namespace)
    except BaseException as exc:
        _reply(["load_exc", *_describe(exc)[1:]])
        return _idle()
    entry = request["entry"]
    if entry not in namespace:
        _reply(["missing", entry])
        return _idle()
    _reply(["ok"])
    function = namespace[entry]
    while True:
        try:
            frame = codec.read_frame(CHILD_REQ, 1 << 30)
        except codec.FrameError:
            os._exit(0)
        op, payload = frame[:1], frame[1:]
        try:
            if op == b"C":
                result = function(*codec.decode(payload))
            else:
                try:
                    call = compile(f"__critiquelab_entry__({payload.decode()})", "<call>", "eval")
                except (SyntaxError, ValueError) as exc:
                    _reply(["callsyntax", str(exc)[:2000]])
                    continue
                result = eval(call, namespace, {"__critiquelab_entry__": function})
        except BaseException as exc:
            _reply(_describe(exc))
            continue
        try:
            encoded = codec.encode(result, return_bytes)
        except codec.TooLarge as exc:
            _reply(["toolarge", str(exc)[:2000]])
            continue
        except codec.CodecError as exc:
            _reply(["bad", str(exc)[:2000]])
            continue
        except BaseException as exc:  # e.g. MemoryError while encoding
            _reply(_describe(exc))
            continue
        codec.write_frame(CHILD_REP, b'["ret",' + encoded + b"]")


def _idle() -> None:
    """After a failed load, wait to be killed (exiting would look like a crash)."""
    while True:
        time.sleep(3600)


def main() -> None:
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    os.dup2(0, IN_FD)
    os.dup2(1, OUT_FD)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the checker
    # As pid 1 of its namespace the server gets only the signals it has a handler for, and
    # Python installs one for SIGINT: a candidate's os.kill(1, SIGINT) would end it with a
    # KeyboardInterrupt. With the default action the kernel drops such a signal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS: no setuid binary can raise a candidate's rights
    _prctl(4, 0)  # PR_SET_DUMPABLE=0: candidates (same uid) cannot ptrace or read our /proc
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    extra = [d for d in args.get("wipe", "").split(":") if d]
    server = Server(args["sweep"], args["workdir"], extra)
    try:
        server.serve()
    except BaseException:
        traceback.print_exc()
        raise


if __name__ == "__main__":
    main()
