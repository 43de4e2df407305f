"""Hostile candidates that try to forge a pass (issue #3). Each test asserts the verdict *and*,
through the ``host_unharmed`` fixture, that the host is unharmed: sentinel file intact, no
candidate process left over, and the harness still scoring an honest sample correctly afterwards.
(Containment — time, memory, processes, files, network, signals: test_sandbox_containment.py.)
"""

from __future__ import annotations

import pytest
from support.hostile import ADD_TEST, FLOAT_TEST, probe, run

from critiquelab.eval import execution
from critiquelab.eval.execution import run_program
from critiquelab.eval.sandbox.limits import Limits
from critiquelab.eval.sandbox.pool import SandboxPool
from critiquelab.eval.verdict import Status

pytestmark = pytest.mark.usefixtures("host_unharmed")


# ----------------------------------------------------------------- unforgeable verdicts


def test_always_equal_object_fails() -> None:
    program = ("class Eq:\n    def __eq__(self, other):\n        return True\n"
               "    __hash__ = object.__hash__\n"
               "def add(a, b):\n    return Eq()\n")
    assert run(program)[:2] == (Status.FAILED, "unsupported_return")


def test_always_equal_int_subclass_fails() -> None:
    program = ("class I(int):\n    def __eq__(self, other):\n        return True\n"
               "    def __sub__(self, other):\n        return 0\n"
               "def add(a, b):\n    return I(7)\n")
    assert run(program)[:2] == (Status.FAILED, "unsupported_return")
    assert run(program, FLOAT_TEST)[:2] == (Status.FAILED, "unsupported_return")


def test_odd_object_nested_in_plain_container_fails() -> None:
    program = ("class S(str):\n    def __eq__(self, other):\n        return True\n"
               "def add(a, b):\n    return [1, {'k': (S('x'),)}]\n")
    assert run(program)[:2] == (Status.FAILED, "unsupported_return")


def test_self_referential_and_too_deep_returns_fail() -> None:
    cyclic = "def add(a, b):\n    x = []\n    x.append(x)\n    return x\n"
    assert run(cyclic)[:2] == (Status.FAILED, "unsupported_return")
    deep = "def add(a, b):\n    x = 3\n    for _ in range(500):\n        x = [x]\n    return x\n"
    assert run(deep)[:2] == (Status.FAILED, "unsupported_return")


def test_huge_return_value_is_refused() -> None:
    program = "def add(a, b):\n    return 'x' * (64 * 2**20)\n"
    assert run(program)[:2] == (Status.FAILED, "return_too_large")


def test_patched_builtins_do_not_reach_the_checker() -> None:
    program = ("import builtins\nbuiltins.abs = lambda x: 0\n"
               "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
               "def add(a, b):\n    return 99.0\n")
    assert run(program, FLOAT_TEST)[:2] == (Status.FAILED, "assertion")
    # Breaking the candidate's own interpreter only breaks the candidate.
    broken = "import builtins\nbuiltins.isinstance = lambda *a: True\n" + program
    assert run(broken, FLOAT_TEST)[0] is Status.FAILED


def test_frame_walking_and_gc_cannot_reach_the_checker() -> None:
    program = (
        "import gc, sys\n"
        "def add(a, b):\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        frame.f_globals['check'] = lambda c: None\n"
        "        frame = frame.f_back\n"
        "    for obj in gc.get_objects():\n"
        "        if isinstance(obj, dict) and 'check' in obj:\n"
        "            obj['check'] = lambda c: None\n"
        "    return -1\n")
    assert run(program)[:2] == (Status.FAILED, "assertion")


def test_printing_or_writing_a_fake_result_does_nothing() -> None:
    program = (
        "import os, struct, sys\n"
        "fake = b'passed'\n"
        "def add(a, b):\n"
        "    print('__CRITIQUELAB_RESULT__[\"passed\", \"\", \"\"]')\n"
        "    print('passed', file=sys.stderr)\n"
        "    for fd in range(0, 64):\n"
        "        for msg in (b'passed', b'[\"ok\"]', b'O', b'R[\"ok\"]'):\n"
        "            try:\n"
        "                os.write(fd, struct.pack('>I', len(msg)) + msg)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return -1\n")
    status, reason, _ = run(program)
    assert status is Status.FAILED and reason in ("assertion", "protocol")


def test_exit_zero_before_the_asserts_fails() -> None:
    assert run("import os\nos._exit(0)\n")[:2] == (Status.FAILED, "exit")
    assert run("import sys\nsys.exit(0)\n")[:2] == (Status.FAILED, "exception")
    assert run("import os\ndef add(a, b):\n    os._exit(0)\n")[:2] == (Status.FAILED, "exit")
    status, reason, detail = run("def add(a, b):\n    raise SystemExit(0)\n")
    assert (status, reason) == (Status.FAILED, "exception") and "SystemExit" in detail


def test_atexit_and_del_tricks_do_nothing() -> None:
    program = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('passed'))\n"
        "class D:\n"
        "    def __del__(self):\n"
        "        print('__CRITIQUELAB_RESULT__[\"passed\", \"\", \"\"]')\n"
        "        sys.stdout.flush()\n"
        "keep = D()\n"
        "def add(a, b):\n"
        "    D()\n"
        "    return -1\n")
    assert run(program)[:2] == (Status.FAILED, "assertion")


def test_hostile_exception_str_cannot_hang_or_forge() -> None:
    raising = ("class E(Exception):\n    def __str__(self):\n        raise RuntimeError\n"
               "def add(a, b):\n    raise E()\n")
    assert run(raising)[:2] == (Status.FAILED, "exception")
    looping = ("class E(Exception):\n    def __str__(self):\n        while True:\n"
               "            pass\ndef add(a, b):\n    raise E()\n")
    assert run(looping, timeout=1.0)[:2] == (Status.TIMED_OUT, "timeout")


def test_queued_answers_do_not_leak_into_the_next_sample() -> None:
    """A candidate that writes extra answer frames on its channel affects only itself."""
    pool = SandboxPool(execution.isolation_level(), workers=1, limits=Limits())
    flood = ("import os, struct\nmsg = b'[\"ret\",3]'\n"
             "for _ in range(50):\n    os.write(4, struct.pack('>I', len(msg)) + msg)\n"
             "def add(a, b):\n    return 3\n")
    wrong = "def add(a, b):\n    return 3\n"
    try:
        job = {"kind": "check", "test": ADD_TEST, "entry_point": "add", "timeout_s": 3.0}
        first = pool.run({**job, "program": flood})
        second = pool.run({**job, "program": wrong})
    finally:
        pool.shutdown()
    assert first["status"] == "failed"
    assert (second["status"], second["reason"]) == ("failed", "assertion")


def test_candidate_never_sees_the_hidden_test() -> None:
    marker = "HIDDEN_EXPECTED_VALUE_81723"
    test = f"def check(candidate):\n    assert candidate(1, 2) == 3, '{marker}'\n"
    program = (
        "import glob, os\n"
        "def add(a, b):\n"
        "    seen = []\n"
        "    for path in glob.glob('/proc/*/cmdline') + glob.glob('/proc/*/environ'):\n"
        "        try:\n"
        f"            if b'{marker}' in open(path, 'rb').read():\n"
        "                seen.append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return seen\n")
    verdict = run_program(program, test, "add", timeout_s=5)
    assert (verdict.status, verdict.reason) == (Status.FAILED, "assertion")
    probe_program = program.replace("def add(a, b)", "def f()")
    assert probe(probe_program) == [[]]
