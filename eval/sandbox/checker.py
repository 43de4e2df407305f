"""The trusted checker: runs the dataset's ``check(candidate)`` against a sandboxed candidate.

Why this split: openai's checker runs candidate and asserts in one process, so a candidate can
return an always-equal object, patch ``builtins``, walk frames to the checker or exit early with
status 0. Here the test's asserts run in *this* process, which never executes candidate code.
``candidate`` inside the test is a :class:`Proxy`: each call ships the arguments to the
candidate process in the sandbox and gets back only plain data through the strict decoder in
``codec``. Anything else (an odd object, a crash, a timeout, garbage on the channel) ends the
sample as a failure decided here.

Only dataset text runs here: the test, and the problem's prompt (for helpers such as
HumanEval/32's ``poly`` that tests use); candidate source only ever travels to the sandbox.

One checker process per worker ("lane"); it owns one sandbox server and serves jobs sent by
the harness (``pool.py``) as length-prefixed JSON on stdin/stdout.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import json
import os
import signal
import sys
import time
from typing import Any

from critiquelab.eval.sandbox import codec
from critiquelab.eval.sandbox.launcher import Sandbox, SandboxFailure
from critiquelab.eval.sandbox.limits import Limits

_STREAMS = ("stdout", "stderr")

# ------------------------------------------------------------------------- verdict helpers


def _close(unrun: Any) -> None:
    """Close a coroutine or generator that will never run (no 'never awaited' warning)."""
    close = getattr(unrun, "close", None)
    if callable(close):
        close()


def _verdict(status: str, reason: str = "", detail: str = "") -> dict[str, Any]:
    return {"status": status, "reason": reason, "detail": detail[:2000]}


def _exception_verdict(type_name: str, message: str, where: str = "") -> dict[str, Any]:
    detail = f"{type_name}: {message}" if message else type_name
    if where:
        detail += f" ({where})"
    if type_name == "MemoryError":
        return _verdict("failed", "memory_limit", detail)
    if "[Errno 27]" in message:  # EFBIG: RLIMIT_FSIZE with SIGXFSZ ignored
        return _verdict("failed", "file_size_limit", detail)
    if "[Errno 28]" in message:  # ENOSPC: the private tmpfs is full
        return _verdict("failed", "disk_limit", detail)
    return _verdict("failed", "exception", detail)


def _death_verdict(body: bytes) -> dict[str, Any]:
    try:
        info = json.loads(body)
    except ValueError:
        info = {}
    sig = info.get("signal")
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXFSZ:  # printing cannot cause it: stdout/stderr are pipes
            return _verdict("failed", "file_size_limit", "a file the candidate wrote exceeded "
                            "the file size limit")
        if sig == signal.SIGXCPU:
            return _verdict("timed_out", "cpu_limit", "CPU time limit exceeded")
        return _verdict("failed", "crash", f"candidate process killed by {name}")
    return _verdict(
        "failed", "exit", f"candidate process exited (code {info.get('code')}) before answering"
    )


def _output_counts(kind: bytes, body: bytes) -> dict[str, int]:
    """Bytes printed per stream, from the server's answer to ``X``; empty if it says nothing
    usable (a restarted server, a garbled answer): the count is a note, never a verdict."""
    try:
        counts = json.loads(body) if kind == b"O" else None
    except ValueError:
        return {}
    if type(counts) is not dict:
        return {}
    return {name: n for name, n in counts.items()
            if name in _STREAMS and type(n) is int and n > 0}


def _with_output_note(verdict: dict[str, Any], printed: dict[str, int]) -> dict[str, Any]:
    """Say in the detail that the candidate printed and that it was discarded: output volume
    never decides a verdict (issue #15), but a reader should know it was there."""
    if not printed:
        return verdict
    streams = ", ".join(f"{name} {printed[name]:,} bytes" for name in _STREAMS if name in printed)
    note = f"candidate output discarded ({streams})"
    detail = verdict["detail"][: 2000 - len(note) - 2]
    return {**verdict, "detail": f"{detail}; {note}" if detail else note}


def _reply_verdict(kind: bytes, body: bytes) -> tuple[Any, dict[str, Any] | None]:
    """Interpret a server reply: (parsed child message, or None; or a terminal verdict)."""
    if kind == b"T":
        return None, _verdict("timed_out", "timeout", "wall-clock limit reached; killed")
    if kind == b"D":
        return None, _death_verdict(body)
    if kind != b"R":
        return None, _verdict("error", "sandbox", f"unexpected server reply {kind!r}")
    try:
        message = codec.load_json(body)
    except (ValueError, RecursionError):
        message = None
    if type(message) is not list or not message or type(message[0]) is not str:
        return None, _verdict("failed", "protocol", "candidate corrupted its reply channel")
    return message, None


def _text(message: list[Any], index: int) -> str:
    value = message[index] if len(message) > index else ""
    return value[:2000] if type(value) is str else ""


def _line(message: list[Any], index: int) -> int:
    """A source line number the candidate reported (0 when absent or not a plausible line)."""
    value = message[index] if len(message) > index else 0
    return value if type(value) is int and 0 < value < 1_000_000 else 0


class CandidateStop(BaseException):
    """Raised inside the test when the candidate's sample is over (timeout, crash, bad value).

    A BaseException so that ``except Exception`` in test code cannot swallow it.
    """


class CandidateError(Exception):
    """Stands in for an exception type of the candidate's that has no builtin equivalent."""


def _mirror(type_name: str, message: str) -> Exception:
    cls = getattr(builtins, type_name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # e.g. UnicodeDecodeError wants five arguments
            pass
    return CandidateError(f"{type_name}: {message}")


class Proxy:
    """What the test calls as ``candidate``: marshals plain-data calls into the sandbox."""

    def __init__(self, sandbox: Sandbox, deadline: float, *, explain: bool = False) -> None:
        self._sandbox = sandbox
        self.deadline = deadline
        self.stop: dict[str, Any] | None = None
        self.raised: list[tuple[BaseException, str, str]] = []
        self.calls = 0
        # Only for an explained check (a positive control's feedback): the last call's arguments
        # and what came back, as text. Off by default, so a scoring run reprs nothing.
        self.explain = explain
        self.last_call: dict[str, str] = {}

    def _note(self, **fields: str) -> None:
        if self.explain:
            self.last_call.update({name: _short(text) for name, text in fields.items()})

    def _end(self, verdict: dict[str, Any]) -> CandidateStop:
        self.stop = self.stop or verdict
        return CandidateStop(verdict["reason"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.stop is not None:
            raise CandidateStop(self.stop["reason"])
        if kwargs:
            raise self._end(_verdict("error", "unsupported_argument", "keyword arguments"))
        try:
            payload = codec.encode(list(args), 1 << 28)
        except codec.CodecError as exc:
            raise self._end(_verdict("error", "unsupported_argument", str(exc))) from None
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self._end(_verdict("timed_out", "timeout", "wall-clock limit reached"))
        self.calls += 1
        if self.explain:  # before the call: a call that never answers is the one to name
            self.last_call = {"args": _short(", ".join(map(repr, args)))}
        try:
            kind, body = self._sandbox.request(b"C", remaining, payload)
        except SandboxFailure as exc:
            raise self._end(_sandbox_died(self._sandbox.level, str(exc))) from None
        message, terminal = _reply_verdict(kind, body)
        if terminal is not None:
            raise self._end(terminal)
        assert message is not None
        tag = message[0]
        if tag == "ret" and len(message) == 2:
            try:
                value = codec.decode_tree(message[1])
            except (codec.CodecError, RecursionError) as exc:
                raise self._end(_verdict("failed", "protocol", f"bad value: {exc}")) from None
            self._note(returned=repr(value))
            return value
        if tag == "exc":
            type_name, text = _text(message, 1), _text(message, 2)
            self._note(raised=f"{type_name}: {text}" if text else type_name)
            verdict = _exception_verdict(type_name, text)
            if verdict["reason"] != "exception":
                raise self._end(verdict)
            error = _mirror(type_name, text)
            self.raised.append((error, type_name, text))
            raise error
        if tag == "bad":
            raise self._end(_verdict("failed", "unsupported_return", _text(message, 1)))
        if tag == "toolarge":
            raise self._end(_verdict("failed", "return_too_large", _text(message, 1)))
        raise self._end(_verdict("failed", "protocol", "unexpected reply from candidate"))


def _sandbox_died(level: str, detail: str) -> dict[str, Any]:
    # Under bwrap the server is pid 1 of its namespace and cannot be signalled by candidates,
    # so its death is the sandbox's fault; at weaker levels a candidate can kill it.
    if level == "bwrap":
        return _verdict("error", "sandbox", detail)
    return _verdict("failed", "crash", f"sandbox server killed during the sample: {detail}")


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _failing_test_line(exc: BaseException, test: str) -> str:
    """The line of the test (``<test>``) where ``exc`` surfaced: the innermost frame of the test
    code, so a helper the test defines names its own line. '' when the test code is not on the
    traceback."""
    line, trace = 0, exc.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == "<test>":
            line = trace.tb_lineno
        trace = trace.tb_next
    lines = test.splitlines()
    return _short(lines[line - 1].strip()) if 0 < line <= len(lines) else ""


@functools.lru_cache(maxsize=1024)
def _compiled(source: str, name: str) -> Any:
    return compile(source, name, "exec")


class Checker:
    """Runs jobs against one sandbox."""

    def __init__(self, level: str, limits: Limits) -> None:
        self.sandbox = Sandbox(level, limits)
        self.limits = limits

    def _load(self, program: str, entry: str, budget: float) -> dict[str, Any] | None:
        """Start a fresh candidate child and execute the module; None when it is ready."""
        request = {"program": program, "entry": entry, "limits": self.limits.to_dict(),
                   "timeout": budget}
        try:
            kind, body = self.sandbox.request(b"L", budget, json.dumps(request).encode())
        except SandboxFailure as exc:
            return _sandbox_died(self.sandbox.level, str(exc))
        message, terminal = _reply_verdict(kind, body)
        if terminal is not None:
            return terminal
        assert message is not None
        tag = message[0]
        if tag == "ok":
            return None
        if tag == "syntax":
            return _verdict("failed", "syntax", _text(message, 1))
        if tag == "missing":
            return _verdict("failed", "missing_entry_point", f"no '{entry}' defined")
        if tag == "load_exc":
            return _exception_verdict(_text(message, 1), _text(message, 2), "while loading")
        return _verdict("failed", "protocol", "unexpected reply from candidate")

    def _end(self) -> dict[str, int]:
        """End the sample (kill its processes); return the bytes it printed per stream."""
        try:
            kind, body = self.sandbox.request(b"X", 0.0)
        except SandboxFailure:  # already stopped; the next request restarts it
            return {}
        return _output_counts(kind, body)

    def check(self, job: dict[str, Any]) -> dict[str, Any]:
        entry, prompt = job["entry_point"], job.get("prompt")
        proxy = Proxy(self.sandbox, 0.0, explain=bool(job.get("explain")))
        namespace: dict[str, Any] = {"__name__": "__critiquelab_test__"}
        try:  # dataset code only: the prompt's helpers, then the test
            if prompt:
                exec(_compiled(prompt, "<prompt>"), namespace)
            namespace[entry] = proxy
            exec(_compiled(job["test"], "<test>"), namespace)
            check = namespace["check"]
        except BaseException as exc:
            return _verdict("error", "test_setup", f"{type(exc).__name__}: {exc}")
        # The candidate's time starts now: loading the test may run the dataset's reference
        # solution (EvalPlus expected outputs), which is not the candidate's time to spend.
        deadline = proxy.deadline = time.monotonic() + float(job["timeout_s"])
        outcome = self._load(job["program"], entry, max(deadline - time.monotonic(), 0.001))
        if outcome is None:
            try:
                returned = check(proxy)
            except BaseException as exc:
                outcome = self._classify(exc, proxy, bool(prompt))
                if proxy.explain:  # which check failed, and on what: a positive control's feedback
                    outcome["explanation"] = {"test_line": _failing_test_line(exc, job["test"]),
                                              **proxy.last_call}
            else:
                if inspect.isawaitable(returned) or inspect.isgenerator(returned):
                    # made where the loader's look at the test cannot see (a factory, a
                    # decorator): none of its asserts ran, so no verdict on the candidate
                    _close(returned)
                    outcome = _verdict("error", "test_setup", "check(candidate) returned a "
                                       "coroutine or generator without running its asserts")
                else:
                    outcome = proxy.stop or _verdict("passed")
        return _with_output_note(outcome, self._end())

    @staticmethod
    def _classify(exc: BaseException, proxy: Proxy, had_prompt: bool) -> dict[str, Any]:
        if proxy.stop is not None:  # the candidate's sample ended (even if the test went on)
            return proxy.stop
        for error, type_name, text in proxy.raised:
            if exc is error:
                return _exception_verdict(type_name, text)
        if isinstance(exc, AssertionError):
            return _verdict("failed", "assertion", str(exc))
        if isinstance(exc, NameError) and not had_prompt:
            return _verdict("error", "test_context", f"{exc}; pass the problem's prompt so the "
                            "test can use the helpers it defines")
        if isinstance(exc, CandidateStop):
            return _verdict("error", "sandbox", "stop without a verdict")
        if not isinstance(exc, Exception):  # SystemExit/KeyboardInterrupt from test code
            return _verdict("error", "test_error", f"{type(exc).__name__}: {exc}")
        # The test's own code raised, e.g. TypeError comparing a wrong-typed return value.
        return _exception_verdict(type(exc).__name__, str(exc), "raised by the test code")

    def calls(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """Run the entry point on each argument-list source; the arguments are evaluated
        *inside* the sandbox, since they may come from a model (CodeT-style generated tests)."""
        timeout = float(job["timeout_s"])
        outcomes: list[dict[str, Any]] = []
        failed_load: dict[str, Any] | None = None
        loaded = False
        for source in job["calls"]:
            start = time.monotonic()
            if failed_load is None and not loaded:
                failed_load = self._load(job["program"], job["entry_point"], timeout)
                loaded = failed_load is None
            if failed_load is not None:
                outcomes.append({"kind": "failed", **failed_load})
                continue
            try:
                kind, body = self.sandbox.request(b"E", timeout, source.encode())
            except SandboxFailure as exc:
                kind, body = b"S", str(exc).encode()
            outcome = self._call_outcome(kind, body)
            outcome["duration_s"] = time.monotonic() - start
            outcomes.append(outcome)
            if outcome["kind"] in ("timed_out", "failed") and outcome["reason"] != "bad_call":
                self._end()  # the child is gone or unusable: reload for the next call
                loaded = False
        self._end()
        return outcomes

    def _call_outcome(self, kind: bytes, body: bytes) -> dict[str, Any]:
        if kind == b"S":
            verdict = _sandbox_died(self.sandbox.level, body.decode(errors="replace"))
            return {"kind": "failed", **verdict}
        message, terminal = _reply_verdict(kind, body)
        if terminal is not None:
            status = "timed_out" if terminal["status"] == "timed_out" else "failed"
            return {"kind": status, **terminal}
        assert message is not None
        tag = message[0]
        if tag == "ret" and len(message) == 2:
            try:
                codec.decode_tree(message[1])  # validate here; the harness decodes again
            except (codec.CodecError, RecursionError) as exc:
                return {"kind": "failed", **_verdict("failed", "protocol", str(exc))}
            return {"kind": "returned", "value": message[1]}
        if tag == "exc":
            verdict = _exception_verdict(_text(message, 1), _text(message, 2))
            if verdict["reason"] == "exception":
                return {"kind": "raised", "error_type": _text(message, 1),
                        "error_message": _text(message, 2), "error_line": _line(message, 3)}
            return {"kind": "failed", **verdict}
        reasons = {"bad": "unsupported_return", "toolarge": "return_too_large",
                   "callsyntax": "bad_call"}
        reason = reasons.get(tag, "protocol")
        return {"kind": "failed", **_verdict("failed", reason, _text(message, 1))}


def main() -> None:
    """Serve jobs from the harness: one JSON frame in, one JSON frame out."""
    level, limits = sys.argv[1], Limits.from_dict(json.loads(sys.argv[2]))
    channel_in, channel_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # test code that prints must not corrupt the channel
    checker = Checker(level, limits)
    try:
        while True:
            try:
                job = json.loads(codec.read_frame(channel_in, 1 << 31))
            except codec.FrameError:
                return
            start = time.monotonic()
            try:
                if job["kind"] == "calls":
                    result: Any = {"outcomes": checker.calls(job)}
                else:
                    result = checker.check(job)
            except SandboxFailure as exc:
                result = {**_verdict("error", "sandbox", str(exc)), "outcomes": []}
            result["duration_s"] = time.monotonic() - start
            try:
                codec.write_frame(channel_out, json.dumps(result).encode())
            except (BrokenPipeError, ConnectionResetError):
                return  # the harness is gone (killed, its terminal closed): nobody to tell
    finally:
        checker.sandbox.stop()


if __name__ == "__main__":
    main()
