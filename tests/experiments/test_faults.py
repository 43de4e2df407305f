"""A fault-injecting endpoint driven through `critiquelab run`: a service failing mid-run is one
line and exit code 3, and the same command then resumes; empty and prose replies are "no code",
warned about and never kept in the LM cache; --no-cache replaces what the cache kept; a hung
request is bounded by the request timeout; a start that is refused writes nothing. (Stopping a
run by a signal: test_stops.py.)"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer, Hang, HttpError, RawReply, completion, humaneval_responder
from support.specs import fake_spec

from critiquelab.experiments.cli.main import main
from critiquelab.experiments.tracking.store import PARENT_TAG, Tracker

PROBLEMS = 4
CODE_ELSEWHERE = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
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
    # code only outside the reply's text: still no answer (not the repr of DSPy's dict tested as code)
    "tool calls only": (completion(None, extra={"tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "answer", "arguments": json.dumps({"code": CODE_ELSEWHERE})}}]}), 0),
    "reasoning only": (completion(None, extra={"reasoning_content": CODE_ELSEWHERE}), 0),
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


def test_replies_without_usage_are_warned_about_not_counted_as_free(
    tmp_path, home, capsys, humaneval_problems
):
    """An endpoint that leaves out the usage block: right answers, but 0 tokens would read as a
    measurement of cost; the run says so on screen and on its MLflow run."""
    healthy = humaneval_responder(humaneval_problems)
    with FakeOpenAIServer(lambda messages: completion(healthy(messages), usage=False)) as fake:
        assert main(["run", _spec(tmp_path, fake.api_base), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert " 1.0 " in out
    line = f"baseline seed 0: {PROBLEMS} of {PROBLEMS} problems made model calls that reported no token usage"
    assert line in err
    (child,) = [r for r in Tracker(home, "test-experiment").runs_tagged({}) if PARENT_TAG in r.data.tags]
    assert line in child.data.tags["critiquelab.warnings"]


def test_replies_cut_at_max_tokens_are_counted_and_warned_about(tmp_path, home, capsys, humaneval_problems):
    """A reply the server stopped at max_tokens is scored as whatever it holds: the run counts
    such replies (a metric) and says so on screen and on its MLflow run, also when the cut
    problem still passed (here the cut falls in chatter after the code); compare repeats it."""
    healthy = humaneval_responder(humaneval_problems)
    first = humaneval_problems[0].prompt.strip()

    def chatty_on_the_first(messages):
        reply = healthy(messages)
        asked = "\n".join(str(m.get("content", "")) for m in messages)
        return reply + " and" * 2000 if first in asked else reply

    with FakeOpenAIServer(chatty_on_the_first, cuts_at_max_tokens=True) as fake:
        assert main(["run", _spec(tmp_path, fake.api_base), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert " 1.0 " in out
    line = (f"baseline seed 0: 1 model replies in 1 of {PROBLEMS} problems stopped at max_tokens, cut "
            "off unfinished (1 of those problems passed)")
    assert line in err
    (child,) = [r for r in Tracker(home, "test-experiment").runs_tagged({}) if PARENT_TAG in r.data.tags]
    assert line in child.data.tags["critiquelab.warnings"]
    assert child.data.metrics["truncated_replies"] == 1
    assert child.data.metrics["problems_with_truncated_replies"] == 1
    out_dir = tmp_path / "report"
    assert main(["compare", child.data.tags[PARENT_TAG], "--out", str(out_dir)]) == 0
    assert f"critiquelab: note: {line}" in capsys.readouterr().err
    assert line in (out_dir / "summary.md").read_text()


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


@pytest.mark.parametrize("status", [500, 429])
def test_a_fault_mid_run_ends_the_process_with_one_line_and_exit_3(status, tmp_path, humaneval_problems):
    """As a process of its own (not main() in the test's): requests of other problems are in
    flight when the fault ends the run, and nothing of them may keep the process alive or print
    at interpreter exit (LiteLLM's connection finalisers did, now and then)."""
    env = {**os.environ, "CRITIQUELAB_HOME": str(tmp_path / "home")}
    script = Switchable(humaneval_problems, HttpError(status, "boom"))
    with FakeOpenAIServer(script) as fake:
        command = [sys.executable, "-m", "critiquelab.experiments.cli", "run", _spec(tmp_path, fake.api_base),
                   "--no-progress", "--request-timeout", "5"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
        runs = Tracker(tmp_path / "home", "test-experiment").runs_tagged({})
        stopped = {r.info.status for r in runs}
        script.fault = None
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 3, done.stderr
    assert "failed mid-run" in line and line.endswith("run the same command again to resume")
    assert resumed.returncode == 0, resumed.stderr  # what was checkpointed before the exit is kept
    assert " 1.0 " in resumed.stdout
    assert stopped == {"KILLED"}  # marked before the process left, none left RUNNING


def test_endpoint_failing_at_start_is_bad_input(tmp_path, home, capsys):
    with FakeOpenAIServer(lambda messages: HttpError(500, "boom")) as fake:
        code = main(["run", _spec(tmp_path, fake.api_base), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not usable" in err
    assert not (home / "mlflow.db").exists()


@pytest.mark.parametrize(("model", "problem"), [
    ("openai/gpt-5", "reasoning models require passing temperature=1.0"),
    ("openai/", "has a provider prefix but no model id after it"),
])
@pytest.mark.parametrize("estimate", [False, True], ids=["run", "estimate"])
def test_model_settings_dspy_refuses_are_one_line_before_anything_is_written(
        tmp_path, home, capsys, model, problem, estimate):
    with FakeOpenAIServer(lambda messages: HttpError(500, "never asked")) as fake:
        code = main(["run", _spec(tmp_path, fake.api_base), "--no-progress", "--model", model,
                     *(["--estimate"] if estimate else [])])
        asked = len(fake.requests)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and asked == 0
    assert line.startswith(f"critiquelab: error: model '{model}': ") and problem in line
    assert not home.exists()


def test_a_hung_endpoint_at_start_up_names_the_probe_and_its_limit(tmp_path, home, capsys):
    with FakeOpenAIServer(lambda messages: Hang(10)) as fake:
        code = main(["run", _spec(tmp_path, fake.api_base), "--no-progress", "--request-timeout", "2"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line == (f"critiquelab: error: model endpoint {fake.api_base} is not usable at start-up: "
                    "no answer within 2 s (the start-up probe's own limit); check --model/--api-base, "
                    "that the server is running, and the API key")


REFUSALS = ["a failing endpoint", "an unset API key variable", "an unreachable Chroma server",
            "an unreachable Chroma server for memory only", "an unreachable tracking server",
            "a failing endpoint with a detected dataset format"]
DETECTED_DATASET = Path(__file__).parents[1] / "eval" / "data" / "humaneval.jsonl"  # no format given


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_refused_start_writes_nothing(
    refusal, tmp_path, home, capsys, caplog, monkeypatch, humaneval_problems
):
    """Every check that can refuse the start (the endpoint's probe, the Chroma server, the
    tracking server) runs before the first file is made: no mlflow.db, no pool store, nothing
    under the data directory."""
    monkeypatch.delenv("CRITIQUELAB_NO_SUCH_KEY", raising=False)
    failing = refusal.startswith("a failing endpoint") or refusal == "an unset API key variable"
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
        elif refusal == "a failing endpoint with a detected dataset format":  # no notice before it
            spec["dataset"] = {"source": str(DETECTED_DATASET), "limit": 2}
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        with caplog.at_level(logging.WARNING):  # a logged line would print beside the error
            code = main(["run", str(path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not home.exists(), sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_a_detected_dataset_format_is_told_once_the_start_stands(tmp_path, home, caplog, humaneval_problems):
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = fake_spec(fake.api_base, dataset={"source": str(DETECTED_DATASET), "limit": 1})
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        with caplog.at_level(logging.WARNING):
            assert main(["run", str(path), "--no-progress"]) == 0
    notices = [r.getMessage() for r in caplog.records if "read as format" in r.getMessage()]
    (notice,) = notices
    assert notice.startswith(f"dataset '{DETECTED_DATASET}': read as format 'humaneval' (detected: ")
    assert notice.endswith("set dataset.format to choose")


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
