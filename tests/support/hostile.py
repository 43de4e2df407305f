"""What the hostile-candidate tests (tests/eval/test_sandbox_hostile.py, test_sandbox_containment.py)
share: a two-assert test of ``add``, and running a candidate or probing what it sees and may do."""

from __future__ import annotations

import shutil

import pytest

from critiquelab.eval.execution import call_function, run_program
from critiquelab.eval.verdict import Status

ADD_TEST = (
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n"
)
FLOAT_TEST = "def check(candidate):\n    assert abs(candidate(1, 2) - 3.0) < 1e-6\n"
BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap not installed")


def run(program: str, test: str = ADD_TEST, timeout: float = 3.0) -> tuple[Status, str, str]:
    verdict = run_program(program, test, "add", timeout_s=timeout)
    return verdict.status, verdict.reason, verdict.detail


def probe(program: str, *calls: str, timeout: float = 5.0) -> list:
    """Run ``f`` in the sandbox and return what it saw (its return values)."""
    outcomes = call_function(program, "f", list(calls or ("",)), timeout_s=timeout)
    assert all(o.kind == "returned" for o in outcomes), outcomes
    return [o.value for o in outcomes]


def trying_each(params: str, ops: dict[str, str], returns: str = "out") -> str:
    """A candidate whose ``f(params)`` tries each of ``ops`` (name: a Python expression) and
    records 'ok' or the exception's type name in ``out``; it returns ``returns``."""
    table = "".join(f"    ops[{name!r}] = lambda: {expression}\n" for name, expression in ops.items())
    return (f"import os\ndef f({params}):\n    out, ops = {{}}, {{}}\n{table}"
            "    for name, op in ops.items():\n"
            "        try:\n            op()\n            out[name] = 'ok'\n"
            "        except Exception as e:\n            out[name] = type(e).__name__\n"
            f"    return {returns}\n")
