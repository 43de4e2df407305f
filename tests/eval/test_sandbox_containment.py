"""Hostile candidates held in (issue #3): time, memory, processes, files, the environment, the
network and signals, and the weaker isolation levels. Each test asserts the verdict and, through
the ``host_unharmed`` fixture, that the host is unharmed. (Forged passes: test_sandbox_hostile.py.)
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from support.hostile import ADD_TEST, needs_bwrap, probe, run, trying_each

from critiquelab.eval import execution
from critiquelab.eval.execution import call_function, run_program
from critiquelab.eval.sandbox.limits import Limits
from critiquelab.eval.sandbox.pool import SandboxPool
from critiquelab.eval.verdict import Status

pytestmark = pytest.mark.usefixtures("host_unharmed")


# ----------------------------------------------------------------------------- containment


def test_infinite_loop_times_out() -> None:
    status, reason, _ = run("def add(a, b):\n    while True:\n        pass\n", timeout=1.0)
    assert (status, reason) == (Status.TIMED_OUT, "timeout")
    assert run("while True:\n    pass\n", timeout=1.0)[:2] == (Status.TIMED_OUT, "timeout")


def test_c_level_call_ignoring_sigalrm_times_out() -> None:
    program = ("import re, signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
               "def add(a, b):\n    return re.match(r'(a+)+$', 'a' * 64 + 'b')\n")
    verdict = run_program(program, ADD_TEST, "add", timeout_s=1.0)
    assert (verdict.status, verdict.reason) == (Status.TIMED_OUT, "timeout")
    assert verdict.duration_s < 3.0


def test_deep_recursion() -> None:
    plain = "def add(a, b):\n    return add(a, b) + 1\n"
    status, reason, detail = run(plain)
    assert (status, reason) == (Status.FAILED, "exception") and detail.startswith("RecursionError")
    # Recursion through a C function (sorted's key) exhausts the C stack: SIGSEGV.
    unbounded = ("import sys\nsys.setrecursionlimit(10**8)\n"
                 "def add(a, b):\n    return sorted([1, 2], key=lambda x: add(a, b))\n")
    status, reason, detail = run(unbounded)
    assert (status, reason) == (Status.FAILED, "crash") and "SIGSEGV" in detail


def test_segfault_is_a_crash_not_a_timeout() -> None:
    program = "import ctypes\ndef add(a, b):\n    return ctypes.string_at(0)\n"
    status, reason, detail = run(program)
    assert (status, reason) == (Status.FAILED, "crash") and "SIGSEGV" in detail
    assert run("import os\ndef add(a, b):\n    os.abort()\n")[:2] == (Status.FAILED, "crash")


def test_memory_bombs() -> None:
    # Generous timeouts: on a loaded 2-core machine filling memory up to the limit takes a while,
    # and the verdict under test is memory_limit, not speed.
    assert run("def add(a, b):\n    return len(bytearray(8 * 2**30))\n", timeout=15)[:2] == (
        Status.FAILED, "memory_limit")
    growing = ("def add(a, b):\n    hoard = []\n    while True:\n"
               "        hoard.append(bytearray(64 * 2**20))\n")
    assert run(growing, timeout=15)[:2] == (Status.FAILED, "memory_limit")
    assert run("hoard = 'x' * (16 * 2**30)\n", timeout=15)[:2] == (Status.FAILED, "memory_limit")


def test_fork_bomb_is_contained_and_cleaned_up() -> None:
    bomb = ("import os\ndef add(a, b):\n    while True:\n        try:\n            os.fork()\n"
            "        except OSError:\n            pass\n")
    assert run(bomb, timeout=1.5)[:2] == (Status.TIMED_OUT, "timeout")
    counter = ("import os, time\ndef f():\n    n = 0\n    try:\n        while True:\n"
               "            if os.fork() == 0:\n                time.sleep(60)\n"
               "                os._exit(0)\n            n += 1\n"
               "    except OSError as e:\n        return [n, type(e).__name__]\n")
    [(forks, error)] = probe(counter)
    assert forks < Limits().nproc and error == "BlockingIOError"


def test_background_processes_do_not_outlive_the_sample(census) -> None:
    program = (
        "import os, subprocess\n"
        "def add(a, b):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            os.execv('/bin/sleep', ['sleep', '4242.77'])\n"
        "        os._exit(0)\n"
        "    subprocess.Popen(['sleep', '4242.77'], start_new_session=True)\n"
        "    return a + b\n")
    assert run(program)[:2] == (Status.PASSED, "")
    assert census.matching("4242.77") == []


def test_big_files_hit_the_file_size_limit() -> None:
    """Printing is not limited (tests/eval/test_sandbox_output.py), files on disk are: a file
    over RLIMIT_FSIZE fails, as EFBIG (Python ignores SIGXFSZ) or by the signal itself, also
    when the candidate points its own stdout at a file."""
    too_big = Limits().file_bytes + 1
    writing = (f"def add(a, b):\n    with open('big', 'wb') as fh:\n"
               f"        fh.write(b'x' * {too_big})\n    return a + b\n")
    status, reason, detail = run(writing)
    assert (status, reason) == (Status.FAILED, "file_size_limit") and "[Errno 27]" in detail
    signalled = ("import signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
                 f"def add(a, b):\n    with open('big', 'wb') as fh:\n"
                 f"        fh.write(b'x' * {too_big})\n    return a + b\n")
    assert run(signalled)[:2] == (Status.FAILED, "file_size_limit")
    redirected = ("import sys\nsys.stdout = open('log.txt', 'w')\n"
                  "def add(a, b):\n    while True:\n        print('x' * 10000)\n")
    assert run(redirected)[:2] == (Status.FAILED, "file_size_limit")
    just_under = writing.replace(str(too_big), str(too_big - 1))
    assert run(just_under)[:2] == (Status.PASSED, "")


def test_disk_filling_hits_the_private_quota() -> None:
    program = ("def add(a, b):\n    i = 0\n    while True:\n"
               "        with open(f'fill{i}', 'wb') as fh:\n"
               "            fh.write(b'x' * (512 * 1024))\n        i += 1\n")
    assert run(program)[:2] == (Status.FAILED, "disk_limit")


@needs_bwrap
def test_files_outside_the_private_dir_are_out_of_reach(host_unharmed: Path) -> None:
    program = trying_each("path", {
        "read": "open(path).read()",
        "write": "open(path, 'w').write('pwned')",
        "delete": "os.unlink(path)",
        "create": "open(os.path.dirname(path) + '/new', 'w').write('x')",
    })
    targets = [host_unharmed / "sentinel.txt", Path(__file__), Path("/etc/hostname"),
               Path("/usr/lib/os-release")]
    results = probe(program, *(repr(str(t)) for t in targets))
    for target, seen in zip(targets, results, strict=True):
        assert seen["write"] != "ok" and seen["delete"] != "ok" and seen["create"] != "ok"
        if not str(target).startswith("/usr"):
            assert seen["read"] != "ok", f"{target} is readable from the sandbox"
    assert results[-1]["read"] == "ok"  # the read-only system tree is there (sanity)


def test_nothing_survives_into_the_next_sample() -> None:
    pool = SandboxPool(execution.isolation_level(), workers=1, limits=Limits())
    litter = ("import os\nfor d in ('.', '/tmp', '/dev/shm', os.environ.get('TMPDIR', '.')):\n"
              "    try:\n        open(os.path.join(d, 'litter'), 'w').write('x')\n"
              "    except OSError:\n        pass\n"
              "def f():\n    return 1\n")
    look = ("import os\ndef f():\n    found = []\n"
            "    for d in ('.', '/tmp', '/dev/shm', '..'):\n"
            "        for root, dirs, files in os.walk(d):\n"
            "            found += [f for f in files if f == 'litter']\n    return found\n")
    try:
        pool.run({"kind": "calls", "program": litter, "entry_point": "f", "calls": [""],
                  "timeout_s": 3.0})
        result = pool.run({"kind": "calls", "program": look, "entry_point": "f",
                           "calls": [""], "timeout_s": 3.0})
    finally:
        pool.shutdown()
    assert result["outcomes"][0]["kind"] == "returned"
    assert result["outcomes"][0]["value"] == ["l"]  # an empty list, in the wire format


def test_environment_is_an_allow_list(census) -> None:
    program = (
        "import glob, os\n"
        "def f():\n"
        "    leaked = []\n"
        "    for path in glob.glob('/proc/*/environ'):\n"
        "        try:\n"
        f"            if b'{census.secret}' in open(path, 'rb').read():\n"
        "                leaked.append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return [sorted(os.environ), leaked, repr(dict(os.environ))]\n")
    assert os.environ["CRITIQUELAB_TEST_API_KEY"] == census.secret  # set before any lane started
    [(names, leaked, dump)] = probe(program)
    assert set(names) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONHASHSEED"}
    assert leaked == [] and census.secret not in dump


@needs_bwrap
def test_no_network_not_even_loopback() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    program = (
        "import socket\n"
        "def f(port):\n"
        "    out = []\n"
        "    for target in [('127.0.0.1', port), ('8.8.8.8', 53), ('pypi.org', 443)]:\n"
        "        try:\n"
        "            socket.create_connection(target, timeout=1).close()\n"
        "            out.append('connected')\n"
        "        except OSError as e:\n"
        "            out.append(type(e).__name__)\n"
        "    return out\n")
    try:
        [results] = probe(program, str(port))
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert "connected" not in results


def test_signals_cannot_reach_the_harness() -> None:
    program = (
        "import os, signal\n"
        "def add(a, b):\n"
        f"    for pid in ({os.getpid()}, {os.getppid()}, -1, 1, os.getppid()):\n"
        "        for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGINT,\n"
        "                    signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):\n"
        "            try:\n"
        "                os.kill(pid, sig)\n"
        "            except OSError:\n"
        "                pass\n"
        "    try:\n"
        f"        os.killpg({os.getpgid(0)}, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        "    return a + b\n")
    status, _, _ = run(program)
    if execution.isolation_level() == "bwrap":
        assert status is Status.PASSED  # the server is pid 1: immune, the sample completes
    else:
        assert status in (Status.PASSED, Status.FAILED)
    assert run("def add(a, b):\n    return a + b\n")[:2] == (Status.PASSED, "")


def test_stdin_is_empty() -> None:
    program = "import sys\ndef f():\n    return sys.stdin.read()\n"
    assert probe(program) == [""]
    outcomes = call_function("def f():\n    return input()\n", "f", [""])
    assert (outcomes[0].kind, outcomes[0].error_type) == ("raised", "EOFError")


@needs_bwrap
def test_no_privilege_and_no_access_to_the_server() -> None:
    program = trying_each("", {
        "setuid0": "os.setuid(0)",
        "server_mem": "open('/proc/1/mem', 'rb').read(1)",
        "server_fds": "os.listdir('/proc/1/fd')",
        "server_environ": "open('/proc/1/environ', 'rb').read()",
        "new_userns": "os.system('unshare -U true') and 1 / 0",
    }, returns="[os.getuid(), out]")
    [(uid, results)] = probe(program)
    assert uid != 0
    assert all(value != "ok" for value in results.values()), results


# ---------------------------------------------------------------- weaker isolation levels


@pytest.mark.skipif(os.geteuid() != 0, reason="the setuid level needs root")
@pytest.mark.parametrize("level", ["setuid", "process"])
def test_fallback_levels_still_judge_honestly(level: str, census) -> None:
    pool = SandboxPool(level, workers=1, limits=Limits())
    job = {"kind": "check", "test": ADD_TEST, "entry_point": "add", "timeout_s": 2.0}
    try:
        ok = pool.run({**job, "program": "def add(a, b):\n    return a + b\n"})
        eq = pool.run({**job, "program": "class E:\n    def __eq__(s, o):\n        return True\n"
                                         "def add(a, b):\n    return E()\n"})
        loop = pool.run({**job, "timeout_s": 1.0,
                         "program": "def add(a, b):\n    while True:\n        pass\n"})
        calls = pool.run({"kind": "calls", "entry_point": "f", "calls": [""], "timeout_s": 2.0,
                          "program": "import os\ndef f():\n    return sorted(os.environ)\n"})
    finally:
        pool.shutdown()
    assert ok["status"] == "passed"
    assert (eq["status"], eq["reason"]) == ("failed", "unsupported_return")
    assert (loop["status"], loop["reason"]) == ("timed_out", "timeout")
    assert census.secret not in repr(calls)
