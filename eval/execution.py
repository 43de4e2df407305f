"""Run a program against a HumanEval-style test in a separate process.

This is the one execution call the rest of the harness uses. The sandbox behind it is
hardened in ``eval/sandbox`` (issue #3); the interface stays this function.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval.verdict import Status, Verdict

DEFAULT_TIMEOUT_S = 10.0

# The driver runs program then test, calls check(entry point) and reports on its own line.
_DRIVER = r"""
import json, sys, traceback
def report(status, reason, detail=""):
    sys.__stdout__.write("\n__CRITIQUELAB_RESULT__" + json.dumps([status, reason, detail[:500]]) + "\n")
    sys.__stdout__.flush()
src = open(sys.argv[1]).read(); test = open(sys.argv[2]).read(); entry = sys.argv[3]
env = {"__name__": "candidate"}
try:
    exec(compile(src, "candidate.py", "exec"), env)
except SyntaxError as e:
    report("failed", "syntax", str(e)); raise SystemExit(0)
except BaseException as e:
    report("failed", "exception", f"{type(e).__name__}: {e}"); raise SystemExit(0)
if entry not in env:
    report("failed", "missing_entry_point", entry); raise SystemExit(0)
try:
    exec(compile(test, "test.py", "exec"), env)
    env["check"](env[entry])
except AssertionError as e:
    report("failed", "assertion", str(e))
except BaseException as e:
    report("failed", "exception", f"{type(e).__name__}: {e}")
else:
    report("passed", "")
"""


def run_program(
    program: str, test: str, entry_point: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Verdict:
    """Execute ``program``, then ``test``, then ``check(entry_point)``; return a typed verdict."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="critiquelab-exec-") as tmp:
        work = Path(tmp)
        (work / "program.py").write_text(program)
        (work / "test.py").write_text(test)
        (work / "driver.py").write_text(_DRIVER)
        try:
            completed = subprocess.run(
                [sys.executable, "-I", "driver.py", "program.py", "test.py", entry_point],
                cwd=work,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0"},
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return Verdict(
                status=Status.TIMED_OUT, reason="timeout", duration_s=time.monotonic() - start,
                isolation="process",
            )
    duration = time.monotonic() - start
    marker = b"__CRITIQUELAB_RESULT__"
    tail = completed.stdout.rsplit(marker, 1)
    if len(tail) != 2:
        return Verdict(
            status=Status.FAILED, reason="crash",
            detail=f"exit code {completed.returncode}: {completed.stderr[-300:].decode(errors='replace')}",
            duration_s=duration, isolation="process",
        )
    status, reason, detail = json.loads(tail[1].splitlines()[0])
    return Verdict(
        status=Status(status), reason=reason, detail=detail, duration_s=duration, isolation="process"
    )


def isolation_level() -> str:
    """The isolation level candidates run under on this machine (logged with every run)."""
    return "process"
