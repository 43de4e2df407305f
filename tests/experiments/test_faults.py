"""A fault-injecting endpoint driven through `critiquelab run`: a service failing mid-run is one
line and exit code 3, and the same command then resumes; empty and prose replies are "no code",
warned about and never kept in the LM cache; --no-cache replaces what the cache kept; a hung
request is bounded by the request timeout; SIGINT and SIGTERM end the process within 5 s whatever
is in flight."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer, Hang, HttpError, RawReply, completion, humaneval_responder
from support.specs import fake_spec

from core.errors import ServiceError, UserError
from experiments.cli import INTERRUPTED, main
from experiments.tracking.store import PARENT_TAG, Tracker

PROBLEMS = 4
FAULTS = {  # name: (reply that replaces every answer after the first problem, expected exit code)
    "HTTP 500": (HttpError(500, "internal server error"), 3),
    "HTTP 503 overloaded": (HttpError(503, "overloaded"), 3),
    "non-JSON body": (RawReply(b"{not json"), 3),
    "HTML page from a proxy": (RawReply(b"<html>502 Bad Gateway</html>", content_type="text/html"), 3),
    "hang past the request timeout": (Hang(6), 3),
    "connection dropped": (Hang(0), 3),
    "empty choices": (completion("", choices=False), 0),
    "null content": (completion(None), 0),
    "prose instead of code": (completion("I am sorry, I cannot help with that."), 0),
}


class Switchable:
    """Healthy answers for the pre-flight and the first problem, then ``fault`` until healed."""

    def __init__(self, problems, fault):
        self.healthy = humaneval_responder(problems)
        self.fault, self.calls, self.lock = fault, 0, threading.Lock()

    def __call__(self, messages):
        with self.lock:
            self.calls += 1
            broken = self.fault is not None and self.calls > 2
        return self.fault if broken else self.healthy(messages)


def _spec(tmp_path, api_base):
    path = tmp_path / "spec.yaml"
    spec = fake_spec(api_base, limit=PROBLEMS, pool={"persist": False})
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_mid_run_then_same_command(fault, tmp_path, home, capsys, humaneval_problems):
    reply, expected = FAULTS[fault]
    script = Switchable(humaneval_problems, reply)
    with FakeOpenAIServer(script) as fake:
        spec = _spec(tmp_path, fake.api_base)
        args = ["run", spec, "--no-progress", "--request-timeout", "2"]
        started = time.monotonic()
        code = main(args)
        elapsed = time.monotonic() - started
        out, err = capsys.readouterr()
        assert code == expected, err
        assert "Traceback" not in err
        assert elapsed < 30, f"{fault}: took {elapsed:.0f}s"
        if expected == 3:
            (line,) = err.strip().splitlines()
            assert "failed mid-run" in line and "run the same command again" in line
            if "hang" in fault:
                assert "no answer within 2 s (model.timeout_s / --request-timeout)" in line
            status = [r.info.status for r in Tracker(home, "test-experiment").runs_tagged({})]
            assert status and set(status) == {"KILLED"}
        else:
            assert "got no code from the model" in err
            assert out.count("baseline") == 1 and " 0.25 " in out  # only the first problem passed
        script.fault = None  # the endpoint is fixed
        # Replies with no code (empty or prose) were never kept in the LM cache: --fresh alone asks again.
        again_args = {0: ["--fresh"], 3: []}[expected]
        again = main([*args, *again_args])
        out, err = capsys.readouterr()
    assert again == 0, err
    assert " 1.0 " in out  # every problem answered and passed
    runs = Tracker(home, "test-experiment").runs_tagged({})
    parents = [r for r in runs if PARENT_TAG not in r.data.tags]
    if expected == 3:  # resumed: the same parent and child runs, nothing duplicated
        assert len(parents) == 1 and len(runs) == 2


def test_no_cache_asks_again_and_its_answers_replace_the_cached_ones(
    tmp_path, home, capsys, humaneval_problems
):
    """A usable but wrong answer is kept; --no-cache asks again and keeps the new answer, which a
    later run then replays without asking."""
    wrong = humaneval_responder(humaneval_problems, wrong={p.task_id for p in humaneval_problems})
    right = humaneval_responder(humaneval_problems)
    script = {"reply": wrong}
    with FakeOpenAIServer(lambda messages: script["reply"](messages)) as fake:
        args = ["run", _spec(tmp_path, fake.api_base), "--no-progress"]
        assert main(args) == 0 and " 0.0 " in capsys.readouterr().out
        script["reply"] = right  # the endpoint is fixed
        assert main([*args, "--fresh"]) == 0 and " 0.0 " in capsys.readouterr().out  # replayed
        assert main([*args, "--fresh", "--no-cache"]) == 0 and " 1.0 " in capsys.readouterr().out
        asked = fake.completions
        assert main([*args, "--fresh"]) == 0 and " 1.0 " in capsys.readouterr().out
        assert fake.completions == asked + 1  # only the start-up probe: the new answers were kept


def test_slow_endpoint_within_the_timeout_is_no_fault(tmp_path, home, capsys, humaneval_problems):
    with FakeOpenAIServer(humaneval_responder(humaneval_problems), delay_s=0.5) as fake:
        code = main(["run", _spec(tmp_path, fake.api_base), "--no-progress", "--request-timeout", "5"])
    assert code == 0, capsys.readouterr().err


def test_endpoint_failing_at_start_is_bad_input(tmp_path, home, capsys):
    with FakeOpenAIServer(lambda messages: HttpError(500, "boom")) as fake:
        code = main(["run", _spec(tmp_path, fake.api_base), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not usable" in err
    assert not (home / "mlflow.db").exists()


def test_a_hung_endpoint_at_start_up_names_the_probe_and_its_limit(tmp_path, home, capsys):
    with FakeOpenAIServer(lambda messages: Hang(10)) as fake:
        code = main(["run", _spec(tmp_path, fake.api_base), "--no-progress", "--request-timeout", "2"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line == (f"critiquelab: error: model endpoint {fake.api_base} is not usable at start-up: "
                    "no answer within 2 s (the start-up probe's own limit); check --model/--api-base, "
                    "that the server is running, and the API key")


REFUSALS = ["a failing endpoint", "an unset API key variable", "an unreachable Chroma server",
            "an unreachable Chroma server for memory only", "an unreachable tracking server"]


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_refused_start_writes_nothing(refusal, tmp_path, home, capsys, monkeypatch, humaneval_problems):
    """Every check that can refuse the start (the endpoint's probe, the Chroma server, the
    tracking server) runs before the first file is made: no mlflow.db, no pool store, nothing
    under the data directory."""
    monkeypatch.delenv("CRITIQUELAB_NO_SUCH_KEY", raising=False)
    failing = refusal in ("a failing endpoint", "an unset API key variable")
    responder = humaneval_responder(humaneval_problems)
    if failing:
        responder = lambda messages: HttpError(500, "boom")  # noqa: E731
    with FakeOpenAIServer(responder) as fake:
        spec = fake_spec(fake.api_base, limit=2)  # pool.persist left at its default: true
        if refusal == "an unset API key variable":
            spec["model"]["api_key_env"] = "CRITIQUELAB_NO_SUCH_KEY"
        elif refusal == "an unreachable Chroma server":
            spec["pool"] = {"chroma_url": "http://127.0.0.1:9"}
        elif refusal == "an unreachable Chroma server for memory only":
            spec["pool"] = {"persist": False, "chroma_url": "http://127.0.0.1:9"}
            spec["pipelines"] = [{"name": "baseline", "memory": {"enabled": True}}]
        elif refusal == "an unreachable tracking server":
            spec["tracking"] = {"uri": "http://127.0.0.1:9"}
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        code = main(["run", str(path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert not home.exists(), sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_a_refused_fresh_start_keeps_the_checkpoints(tmp_path, home, capsys, humaneval_problems):
    """--fresh sets earlier checkpoints aside only once the start is sure: a refused one leaves
    them where the next command finds them."""
    responder = Switchable(humaneval_problems, None)
    with FakeOpenAIServer(responder) as fake:
        spec = _spec(tmp_path, fake.api_base)
        assert main(["run", spec, "--no-progress"]) == 0
        before = sorted(p.name for p in (home / "checkpoints").iterdir())
        responder.fault, responder.calls = HttpError(500, "boom"), 10
        capsys.readouterr()
        assert main(["run", spec, "--no-progress", "--fresh"]) == 2
    assert "not usable at start-up" in capsys.readouterr().err
    assert sorted(p.name for p in (home / "checkpoints").iterdir()) == before


STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _open_runs(home):
    """The runs of the data directory's store still RUNNING (a stop must mark them KILLED)."""
    from mlflow.tracking import MlflowClient

    from experiments.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri(home))
    experiments = [e.experiment_id for e in client.search_experiments()]
    return [r.info.run_name for r in client.search_runs(experiments) if r.info.status == "RUNNING"]


def _hangs_once_on_the_second_problem(problems):
    """A responder that "hangs" for a minute the first time it is asked the second problem (the
    event says when), and answers everything else."""
    entered = threading.Event()
    healthy = humaneval_responder(problems)
    stuck = problems[1].prompt.strip()

    def respond(messages):
        if any(stuck in str(m.get("content", "")) for m in messages) and not entered.is_set():
            entered.set()
            return Hang(60)
        return healthy(messages)

    return entered, respond


@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_signal_ends_the_process_within_5s_with_a_request_in_flight(
    signum, tmp_path, humaneval_problems
):
    """The model "hangs" for a minute; the signal must not wait for it, and the same command
    afterwards finishes the run."""
    entered, respond = _hangs_once_on_the_second_problem(humaneval_problems)

    home = tmp_path / "home"
    env = {**os.environ, "CRITIQUELAB_HOME": str(home)}
    with FakeOpenAIServer(respond) as fake:
        command = [sys.executable, "-m", "experiments.cli", "run", _spec(tmp_path, fake.api_base),
                   "--no-progress"]
        # start_new_session: the signal reaches only this process, as `kill PID` does.
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        assert entered.wait(120), proc.stderr.read() if proc.poll() is not None else "never asked"
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
        err = proc.stderr.read()
        assert code == 130, err
        assert took < 5, f"the process took {took:.1f}s to end"
        assert "interrupted" in err and "Traceback" not in err and "terminate called" not in err
        assert _open_runs(home) == []
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
        "from experiments.cli import main\n"
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

    entered, respond = _hangs_once_on_the_second_problem(humaneval_problems)

    home = tmp_path / "home"
    env = {**os.environ, "CRITIQUELAB_HOME": str(home), "PYTHONPATH": os.getcwd()}
    controller, terminal = pty.openpty()
    with FakeOpenAIServer(respond) as fake:
        # A session of its own whose controlling terminal is the pty, then critiquelab in its place.
        boot = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                "os.execv(sys.executable, [sys.executable, '-m', 'experiments.cli', *sys.argv[1:]])")
        proc = subprocess.Popen([sys.executable, "-c", boot, "run", _spec(tmp_path, fake.api_base)],
                                env=env, stdin=terminal, stdout=terminal, stderr=terminal,
                                start_new_session=True)
        os.close(terminal)
        stop = threading.Event()
        drain = threading.Thread(target=_drain, args=(controller, stop), daemon=True)
        drain.start()
        assert entered.wait(120), "never asked"
        time.sleep(0.5)
        stop.set()
        drain.join()  # no read in flight: a blocked read would keep the terminal open past close()
        closed = time.monotonic()
        os.close(controller)  # the terminal window closes
        code = proc.wait(timeout=30)
        took = time.monotonic() - closed
    assert code == 130 and took < 5, (code, took)
    assert _open_runs(home) == []


def _store_process(parent: int) -> int:
    """The pid of ``parent``'s message store process (pipelines/pool/chroma_process.py): the
    newest one alive, should an earlier test in the same process have left one behind."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            state, ppid, started = fields[0], int(fields[1]), int(fields[19])
            if ppid != parent or state == "Z":
                continue
            if b"child_main" in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append((started, int(entry)))
    assert found, f"process {parent} has no message store process"
    return max(found)[1]


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

    handlers = sys.modules["experiments.cli.commands"].HANDLERS
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
    entered, respond = _hangs_once_on_the_second_problem(humaneval_problems)
    home = tmp_path / "home"
    env = {**os.environ, "CRITIQUELAB_HOME": str(home)}
    with FakeOpenAIServer(respond) as fake:
        path = tmp_path / "spec.yaml"  # one problem at a time: nothing is published while the request hangs
        path.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=PROBLEMS, concurrency=1)))
        command = [sys.executable, "-m", "experiments.cli", "run", str(path), "--no-progress"]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        assert entered.wait(120), proc.stderr.read() if proc.poll() is not None else "never asked"
        os.kill(_store_process(proc.pid), signal.SIGSEGV)
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
    assert _open_runs(home) == []


def test_a_store_crashing_mid_run_stops_the_run_at_once(tmp_path, home, capsys, humaneval_problems):
    """The message store's process crashes mid-run: the next message published ends the run with
    exit 3 and a line that says how (not hours later, at the final flush, with every message since
    lost), and the same command then finishes the run."""
    healthy = humaneval_responder(humaneval_problems)
    crashed = threading.Event()

    def respond(messages):
        second = humaneval_problems[1].prompt.strip()
        if not crashed.is_set() and any(second in str(m.get("content", "")) for m in messages):
            store = _store_process(os.getpid())
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
        assert _open_runs(home) == []
        assert main(args) == 0, capsys.readouterr().err
    assert " 1.0 " in capsys.readouterr().out


def _drain(fd, stop):
    """Read the terminal's output until told to stop (a full pty would block the command)."""
    import select

    with contextlib.suppress(OSError):
        while not stop.is_set():
            if select.select([fd], [], [], 0.1)[0] and not os.read(fd, 1 << 16):
                return


def test_fault_mid_optimize_then_same_command(tmp_path, home, capsys, humaneval_problems):
    """The other verb that calls the model: a 500 mid-way is exit 3, and the same command then
    finishes from the steps and checkpoints it had."""
    from support.critic_scripts import critic_loop_scripts
    from support.role_responder import role_responder

    healthy = role_responder(critic_loop_scripts(humaneval_problems))
    calls = {"n": 0, "broken": True}

    def respond(messages):
        calls["n"] += 1
        if calls["broken"] and calls["n"] > 8:  # a few problems into the baseline validation
            return HttpError(500, "internal server error")
        return healthy(messages)

    with FakeOpenAIServer(respond) as fake:
        spec = {
            "name": "opt-fault", "pipeline": {"name": "critic_loop", "params": {"max_iterations": 2}},
            "optimizer": {"name": "bootstrap", "params": {"max_bootstrapped_demos": 1}},
            "split": {"seed": 1, "train": 2, "val": 2}, "dataset": {"source": "humaneval", "limit": 6},
            "model": {"id": "openai/fake", "api_base": fake.api_base, "num_retries": 0},
        }
        path = tmp_path / "opt.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert main(["optimize", str(path)]) == 3
        err = capsys.readouterr().err
        line = err.strip().splitlines()[-1]  # after optimize's step progress lines
        assert "Traceback" not in err and line.startswith("critiquelab: error: model endpoint")
        assert "failed mid-run" in line and "run the same command again" in line
        calls["broken"] = False
        assert main(["optimize", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("refusal", ["an unreachable tracking server", "an unreachable cluster address",
                                     "no cluster on this machine (auto)"])
def test_what_refuses_without_starting_anything_comes_before_the_model(
    refusal, tmp_path, home, capsys, monkeypatch, humaneval_problems
):
    """A tracking server or a cluster address that does not answer refuses the start before the
    model is started or asked: a bundled model's server would otherwise start for nothing and
    leave its log in the data directory."""
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = fake_spec(fake.api_base, limit=1)
        if refusal == "an unreachable tracking server":
            spec["tracking"] = {"uri": "http://127.0.0.1:9"}
        elif refusal == "an unreachable cluster address":
            spec["execution"] = {"executor": "ray", "address": "127.0.0.1:9"}
        else:  # whatever runs on this machine, Ray's own lookup finds no cluster
            def no_cluster(address: str) -> str:
                raise ConnectionError("Could not find any running Ray instance.")

            monkeypatch.setattr("ray._private.services.canonicalize_bootstrap_address_or_die", no_cluster)
            spec["execution"] = {"executor": "ray", "address": "auto"}
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        code = main(["run", str(path), "--no-progress"])
        asked = len(fake.requests)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert asked == 0 and not home.exists()


KILL_AT = os.path.join(os.path.dirname(__file__), "..", "support", "kill_at.py")
# (where the signal comes, occurrence, match, before): a sweep over the moments of a run.
SIGNAL_MOMENTS = {
    "before start-up": ("experiments.runner:load_inputs", 1, "", True),
    "mid-problem": ("experiments.checkpoints:CheckpointStore.append", 1, "pipeline='baseline'", False),
    "between pipelines": ("experiments.tracking.store:Tracker.finish", 1, "", False),
    "during compare": ("eval.report:write_report", 1, "", True),
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
    assert not home.exists() or _open_runs(home) == []
