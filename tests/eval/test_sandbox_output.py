"""Output volume never decides a verdict (issue #15): a candidate may print as much as it likes,
the tests decide, the output is discarded and noted in the detail, the sandbox stays bounded in
memory and printing forever still ends at the wall-clock limit. Through ``host_unharmed`` every
test also checks that nothing of the candidate is left running and the harness still scores.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from critiquelab.eval.execution import call_function, isolation_level, run_program
from critiquelab.eval.sandbox.limits import Limits
from critiquelab.eval.sandbox.pool import SandboxPool
from critiquelab.eval.verdict import Status, Verdict

pytestmark = pytest.mark.usefixtures("host_unharmed")

MB = 1 << 20
ADD_TEST = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3, 'add(1, 2) should be 3'\n"
    "    assert candidate(5, 5) == 10\n"
)
ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = "def add(a, b):\n    return a - b\n"

# Each floods 50 MB at module level, then defines ``add`` (the body appended), and says how
# many bytes reach which stream (Python's own buffers flushed, so the count is exact).
FLOODS = {
    "print_lines": ("for _ in range(5 * 1024):\n    print('x' * 10239)\n"
                    "import sys\nsys.stdout.flush()\n", "stdout", 50 * MB),
    "print_stderr": ("import sys\nfor _ in range(5 * 1024):\n    print('e' * 10239, file=sys.stderr)\n"
                     "sys.stderr.flush()\n", "stderr", 50 * MB),
    "no_newlines": ("for _ in range(50 * 1024):\n    print('n' * 1024, end='')\n"
                    "import sys\nsys.stdout.flush()\n", "stdout", 50 * MB),
    "os_write": ("import os\nfor _ in range(50 * 16):\n    os.write(1, b'w' * 65536)\n",
                 "stdout", 50 * MB),
}


def printed(verdict: Verdict) -> dict[str, int]:
    """The byte counts the detail's output note reports, per stream."""
    note = re.search(r"candidate output discarded \(([^)]*)\)", verdict.detail)
    assert note, f"no output note in {verdict.detail!r}"
    return {name: int(count.replace(",", ""))
            for name, count in re.findall(r"(stdout|stderr) ([\d,]+) bytes", note.group(1))}


@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_correct_candidate_that_prints_a_lot_passes(flood: str) -> None:
    code, stream, size = FLOODS[flood]
    verdict = run_program(code + ADD, ADD_TEST, "add", timeout_s=20)
    assert (verdict.status, verdict.reason) == (Status.PASSED, "")
    assert printed(verdict) == {stream: size}


def test_printing_inside_the_entry_point_on_every_call_passes() -> None:
    program = ("import sys\ndef add(a, b):\n    print('p' * (10 * 2**20), end='')\n"
               "    sys.stderr.write('q' * 2**20)\n    sys.stdout.flush()\n"
               "    sys.stderr.flush()\n    return a + b\n")
    verdict = run_program(program, ADD_TEST, "add", timeout_s=20)
    assert (verdict.status, verdict.reason) == (Status.PASSED, "")
    assert printed(verdict) == {"stdout": 2 * 10 * MB, "stderr": 2 * MB}  # two calls


def test_quiet_candidate_gets_no_note() -> None:
    verdict = run_program(ADD, ADD_TEST, "add", timeout_s=5)
    assert (verdict.status, verdict.detail) == (Status.PASSED, "")


def test_wrong_candidate_that_prints_a_lot_fails_for_the_tests_reason() -> None:
    flood = "import os\nfor _ in range(50 * 16):\n    os.write(2, b'w' * 65536)\n"
    verdict = run_program(flood + WRONG_ADD, ADD_TEST, "add", timeout_s=20)
    assert (verdict.status, verdict.reason) == (Status.FAILED, "assertion")
    assert verdict.detail.startswith("add(1, 2) should be 3; ")
    assert printed(verdict) == {"stderr": 50 * MB}
    raising = ("def add(a, b):\n    print('r' * (20 * 2**20))\n"
               "    raise ValueError('bad input')\n")
    verdict = run_program(raising, ADD_TEST, "add", timeout_s=20)
    assert (verdict.status, verdict.reason) == (Status.FAILED, "exception")
    assert verdict.detail.startswith("ValueError: bad input; candidate output discarded")


@pytest.mark.parametrize("where", ["module", "entry_point", "thread"])
def test_printing_forever_ends_at_the_wall_clock_limit(where: str) -> None:
    loop = "while True:\n    print('x' * 10000)\n"
    program = {
        "module": loop + ADD,
        "entry_point": "def add(a, b):\n" + "".join(f"    {line}\n" for line in
                                                     loop.splitlines()),
        "thread": "import threading, time\ndef add(a, b):\n"
                  "    threading.Thread(target=lambda: [print('t' * 10000) for _ in iter(int, 1)],"
                  " daemon=True).start()\n    while True:\n        time.sleep(1)\n",
    }[where]
    verdict = run_program(program, ADD_TEST, "add", timeout_s=1.5)
    assert (verdict.status, verdict.reason) == (Status.TIMED_OUT, "timeout")
    assert verdict.duration_s < 1.5 + 2.0
    assert printed(verdict)["stdout"] > 0


def test_a_background_printer_does_not_stall_the_sample() -> None:
    """A thread and a forked process print without pause while the test calls the candidate
    many times: between calls nobody reads, so they block on the full pipe; during each call the
    server drains it. The answers come back and the sample passes; both printers are killed
    with the sample (``host_unharmed``)."""
    program = (
        "import os, sys, threading\n"
        "def spam(stream):\n    while True:\n        stream.write('s' * 65536)\n"
        "threading.Thread(target=spam, args=(sys.stdout,), daemon=True).start()\n"
        "if os.fork() == 0:\n    spam(sys.stderr)\n" + ADD)
    test = "def check(candidate):\n    for i in range(300):\n        assert candidate(i, 1) == i + 1\n"
    verdict = run_program(program, test, "add", timeout_s=20)
    assert (verdict.status, verdict.reason) == (Status.PASSED, "")
    assert printed(verdict)["stdout"] > 0


def test_printed_protocol_messages_forge_nothing() -> None:
    """Answers travel on the child's own reply channel; stdout/stderr only ever get counted."""
    frames = [b'["ret",3]', b'R["ret",3]', b'["ok"]', b'O', b'passed', b'{"status": "passed"}']
    program = (
        "import os, struct, sys\n"
        f"FRAMES = {frames!r}\n"
        "def add(a, b):\n"
        "    for fd in (1, 2):\n"
        "        for frame in FRAMES:\n"
        "            os.write(fd, struct.pack('>I', len(frame)) + frame)\n"
        "            os.write(fd, frame + b'\\n')\n"
        "    print('__CRITIQUELAB_RESULT__[\"passed\", \"\", \"\"]')\n"
        "    sys.stdout.flush()\n"
        "    return -1\n")
    verdict = run_program(program, ADD_TEST, "add", timeout_s=5)
    assert (verdict.status, verdict.reason) == (Status.FAILED, "assertion")
    probe = program.replace("def add(a, b)", "def f()")
    [outcome] = call_function(probe, "f", [""])
    assert (outcome.kind, outcome.value) == ("returned", -1)


def test_calls_that_print_a_lot_return_their_values() -> None:
    program = "def f(n):\n    print('c' * (n * 2**20))\n    return n * 2\n"
    outcomes = call_function(program, "f", ["30", "1"], timeout_s=10)
    assert [(o.kind, o.value) for o in outcomes] == [("returned", 60), ("returned", 2)]


def _descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_descendants(int(child))]
    return found


def _peak_rss_mib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    [kib] = re.findall(r"VmHWM:\s+(\d+) kB", status)
    return int(kib) // 1024


def test_the_sandbox_stays_bounded_while_a_candidate_prints_200_mb() -> None:
    """The checker and the sandbox server (the lane's processes) keep counts, not bytes: their
    peak memory stays far below what the candidate printed."""
    before = set(_descendants(os.getpid()))
    pool = SandboxPool(isolation_level(), workers=1, limits=Limits())
    flood = "import os\nfor _ in range(200 * 16):\n    os.write(1, b'm' * 65536)\n" + ADD
    try:
        result = pool.run({"kind": "check", "program": flood, "test": ADD_TEST,
                           "entry_point": "add", "timeout_s": 30.0})
        lane = set(_descendants(os.getpid())) - before  # checker, (bwrap,) server, idle child
        peaks = {pid: _peak_rss_mib(pid) for pid in lane}
    finally:
        pool.shutdown()
    assert result["status"] == "passed"
    assert "stdout 209,715,200 bytes" in result["detail"]
    assert len(peaks) >= 2  # the checker and at least the server
    assert max(peaks.values()) < 64, peaks


@pytest.mark.skipif(os.geteuid() != 0, reason="the setuid level needs root")
@pytest.mark.parametrize("level", ["setuid", "process"])
def test_fallback_levels_let_output_through_too(level: str) -> None:
    pool = SandboxPool(level, workers=1, limits=Limits())
    code, _, _ = FLOODS["os_write"]
    job = {"kind": "check", "test": ADD_TEST, "entry_point": "add", "timeout_s": 20.0}
    try:
        passed = pool.run({**job, "program": code + ADD})
        wrong = pool.run({**job, "program": code + WRONG_ADD})
        forever = pool.run({**job, "timeout_s": 1.0,
                            "program": "while True:\n    print('x' * 10000)\n" + ADD})
    finally:
        pool.shutdown()
    assert (passed["status"], passed["detail"]) == (
        "passed", "candidate output discarded (stdout 52,428,800 bytes)")
    assert (wrong["status"], wrong["reason"]) == ("failed", "assertion")
    assert (forever["status"], forever["reason"]) == ("timed_out", "timeout")
