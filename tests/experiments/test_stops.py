"""Stopping a run: SIGINT, SIGTERM and SIGHUP (a closing terminal too) end the process within 5 s
whatever is in flight, exit 130, quiet, with no run left RUNNING, and the same command resumes;
a message store process that crashes is noticed at the next message (exit 3), and never turns a
stop into a service error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec
from support.stops import drain, hangs_once_on_the_second_problem, open_runs, store_process

from critiquelab.core.errors import ServiceError, UserError
from critiquelab.eval.sandbox.pool import LANE_PREFIX
from critiquelab.experiments.cli.main import INTERRUPTED, main

PROBLEMS = 4
STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _spec(tmp_path, api_base):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(fake_spec(api_base, limit=PROBLEMS, pool={"persist": False})))
    return str(path)


@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_signal_ends_the_process_within_5s_with_a_request_in_flight(
    signum, tmp_path, sandbox_tmpdir, humaneval_problems
):
    """The model "hangs" for a minute; the signal must not wait for it, the sandbox's lanes (the
    first problem was scored) go with the process, and the same command afterwards finishes the
    run."""
    entered, respond = hangs_once_on_the_second_problem(humaneval_problems)

    home = tmp_path / "home"
    env = {**os.environ, "CRITIQUELAB_HOME": str(home), "TMPDIR": str(sandbox_tmpdir)}
    with FakeOpenAIServer(respond) as fake:
        command = [sys.executable, "-m", "critiquelab.experiments.cli", "run", _spec(tmp_path, fake.api_base),
                   "--no-progress"]
        # start_new_session: the signal reaches only this process, as `kill PID` does.
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        assert entered.wait(120), proc.stderr.read() if proc.poll() is not None else "never asked"
        time.sleep(0.5)
        assert list(sandbox_tmpdir.glob(f"{LANE_PREFIX}*")), "the first problem was not scored"
        sent = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
        err = proc.stderr.read()
        assert code == 130, err
        assert took < 5, f"the process took {took:.1f}s to end"
        assert "interrupted" in err and "Traceback" not in err and "terminate called" not in err
        assert list(sandbox_tmpdir.glob(f"{LANE_PREFIX}*")) == []  # no atexit ran, yet none left
        assert open_runs(home) == []
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert " 1.0 " in resumed.stdout


@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_a_signal_while_shutting_down_is_exit_130_and_quiet(signum, tmp_path):
    """After the command's work is done, library exit hooks still run (MLflow, Chroma): a signal
    then must not print "Exception ignored in atexit callback" and exit 0 or -15."""
    script = tmp_path / "late.py"
    script.write_text(
        "import atexit, sys, time\n"
        "from critiquelab.experiments.cli.main import main\n"
        "atexit.register(time.sleep, 30)  # stands in for a slow exit hook\n"
        "sys.argv = ['critiquelab', 'pipelines']\n"
        "code = main()\n"
        "print('DONE', flush=True)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "CRITIQUELAB_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert any(line.strip() == "DONE" for line in proc.stdout), proc.stderr.read()
    time.sleep(0.5)
    proc.send_signal(signum)
    code = proc.wait(timeout=10)
    err = proc.stderr.read()
    assert code == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err.strip().splitlines() == ["critiquelab: interrupted while shutting down"]


def test_the_terminal_closing_mid_run_is_exit_130_and_the_runs_killed(tmp_path, humaneval_problems):
    """The command's controlling terminal (a pseudo-terminal here) closes with a request in
    flight: the kernel's SIGHUP ends it like Ctrl-C — exit 130 within 5 s, no run left RUNNING —
    although nothing it prints can be written any more."""
    import pty

    entered, respond = hangs_once_on_the_second_problem(humaneval_problems)

    home = tmp_path / "home"
    env = {**os.environ, "CRITIQUELAB_HOME": str(home), "PYTHONPATH": os.getcwd()}
    controller, terminal = pty.openpty()
    with FakeOpenAIServer(respond) as fake:
        # A session of its own whose controlling terminal is the pty, then critiquelab in its place.
        boot = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                "os.execv(sys.executable, [sys.executable, '-m', 'critiquelab.experiments.cli',"
                " *sys.argv[1:]])")
        proc = subprocess.Popen([sys.executable, "-c", boot, "run", _spec(tmp_path, fake.api_base)],
                                env=env, stdin=terminal, stdout=terminal, stderr=terminal,
                                start_new_session=True)
        os.close(terminal)
        stop = threading.Event()
        reader = threading.Thread(target=drain, args=(controller, stop), daemon=True)
        reader.start()
        assert entered.wait(120), "never asked"
        time.sleep(0.5)
        stop.set()
        reader.join()  # no read in flight: a blocked read would keep the terminal open past close()
        closed = time.monotonic()
        os.close(controller)  # the terminal window closes
        code = proc.wait(timeout=30)
        took = time.monotonic() - closed
    assert code == 130 and took < 5, (code, took)
    assert open_runs(home) == []



@pytest.mark.parametrize(("kind", "alone"), [(ServiceError, 3), (UserError, 2)])
def test_an_error_while_a_stop_unwinds_does_not_replace_the_stop(kind, alone, monkeypatch, home, capsys):
    """Whatever fails in the unwinding after Ctrl-C (even raised ``from None``) is a line before
    the stop's own, and the command ends as stopped; the same error with no stop is exit 3 or 2."""
    message = "the message store process was killed by SIGSEGV"

    def stopped_then_fails(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise kind(message) from None

    def fails(args):
        raise kind(message)

    handlers = sys.modules["critiquelab.experiments.cli.commands"].HANDLERS
    monkeypatch.setitem(handlers, "pipelines", stopped_then_fails)
    assert main(["pipelines"]) == 130
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"critiquelab: warning: while stopping: {message}", INTERRUPTED]
    monkeypatch.setitem(handlers, "pipelines", fails)
    assert main(["pipelines"]) == alone
    assert "interrupted" not in capsys.readouterr().err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_store_that_failed_unnoticed_does_not_turn_a_stop_into_a_service_error(
    signum, tmp_path, humaneval_problems
):
    """The message store's process crashed (SIGSEGV in Chroma's native code) while a request was
    in flight; nothing noticed until the stop's unwinding flushed the pool. That failure is said
    on a line of its own, and the command still ends as stopped: exit 130 within 5 s, the
    interrupt's line last, no run left RUNNING."""
    entered, respond = hangs_once_on_the_second_problem(humaneval_problems)
    home = tmp_path / "home"
    env = {**os.environ, "CRITIQUELAB_HOME": str(home)}
    with FakeOpenAIServer(respond) as fake:
        path = tmp_path / "spec.yaml"  # one problem at a time: nothing is published while the request hangs
        path.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=PROBLEMS, concurrency=1)))
        command = [sys.executable, "-m", "critiquelab.experiments.cli", "run", str(path), "--no-progress"]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        assert entered.wait(120), proc.stderr.read() if proc.poll() is not None else "never asked"
        os.kill(store_process(proc.pid), signal.SIGSEGV)
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signum)  # to the command alone, as `kill PID` does
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
        err = proc.stderr.read()
    lines = err.strip().splitlines()
    assert code == 130, err
    assert took < 5, f"the process took {took:.1f}s to end"
    assert lines[-1] == INTERRUPTED, err
    assert any("message store process" in line and "SIGSEGV" in line for line in lines[:-1]), err
    assert "Traceback" not in err and "critiquelab: error" not in err
    assert open_runs(home) == []


def test_a_store_crashing_mid_run_stops_the_run_at_once(tmp_path, home, capsys, humaneval_problems):
    """The message store's process crashes mid-run: the next message published ends the run with
    exit 3 and a line that says how (not hours later, at the final flush, with every message since
    lost), and the same command then finishes the run."""
    healthy = humaneval_responder(humaneval_problems)
    crashed = threading.Event()

    def respond(messages):
        second = humaneval_problems[1].prompt.strip()
        if not crashed.is_set() and any(second in str(m.get("content", "")) for m in messages):
            store = store_process(os.getpid())
            os.kill(store, signal.SIGSEGV)
            while Path(f"/proc/{store}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                time.sleep(0.01)  # dead (a zombie until the parent asks), before the answer is published
            crashed.set()
        return healthy(messages)

    with FakeOpenAIServer(respond) as fake:
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=PROBLEMS, concurrency=1)))
        args = ["run", str(path), "--no-progress"]
        assert main(args) == 3
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert crashed.is_set() and fake.completions < PROBLEMS + 1  # the problems after it were not asked
        assert "message store process" in line and "killed by SIGSEGV" in line, line
        assert f"move {home / 'chroma'} aside" in line
        assert line.endswith("run the same command again to resume")
        assert open_runs(home) == []
        assert main(args) == 0, capsys.readouterr().err
    assert " 1.0 " in capsys.readouterr().out



KILL_AT = os.path.join(os.path.dirname(__file__), "..", "support", "kill_at.py")
# (where the signal comes, occurrence, match, before): a sweep over the moments of a run.
SIGNAL_MOMENTS = {
    "before start-up": ("critiquelab.experiments.runner:load_inputs", 1, "", True),
    "mid-problem": ("critiquelab.experiments.checkpoints:CheckpointStore.append", 1, "pipeline='baseline'",
                    False),
    "between pipelines": ("critiquelab.experiments.tracking.store:Tracker.finish", 1, "", False),
    "during compare": ("critiquelab.eval.report:write_report", 1, "", True),
}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("moment", list(SIGNAL_MOMENTS))
def test_a_signal_at_any_moment_is_exit_130_quiet_and_leaves_no_run_open(
    moment, signum, tmp_path, humaneval_problems
):
    target, occurrence, match, before = SIGNAL_MOMENTS[moment]
    home = tmp_path / "home"
    checkout = os.getcwd()
    env = {**os.environ, "CRITIQUELAB_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))}
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = fake_spec(fake.api_base, limit=2,
                         pipelines=[{"name": "baseline"}, {"name": "vote", "params": {"k": 2}}])
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        stop = [target, str(occurrence), "--match", match, "--signal", signal.Signals(signum).name[3:]]
        command = [sys.executable, KILL_AT, *stop, *(["--before"] if before else []),
                   "--", "run", str(path), "--no-progress"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("critiquelab: interrupted"), done.stderr
    assert not home.exists() or open_runs(home) == []
