"""Bad command lines and spec files, as a table: each is one line on stderr, exit code 2, and
nothing in the data directory; plus what must be accepted (options after the verb, a str home)
and where a hostile experiment name may write."""

from __future__ import annotations

import os
import socket

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec

from critiquelab.experiments.cli.main import main

GOOD = "name: x\npipelines: [{name: baseline}]\n"
# Nine levels of nine aliases each: 9**9 strings once expanded, a few hundred bytes as written.
LAUGHS = "x-anchors:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"  l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]\n" for n in range(1, 9))


def _spec(tmp_path, text: str | bytes) -> str:
    path = tmp_path / "spec.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


BAD = {  # name: (spec text, extra arguments after `run SPEC`, what the line must say)
    "empty --task-ids": (GOOD, ["--task-ids", ","], "--task-ids: expected a comma-separated list"),
    "empty --seeds": (GOOD, ["--seeds", ""], "--seeds: expected a comma-separated list"),
    "non-integer --seeds": (GOOD, ["--seeds", "1,x"], "expected comma-separated integers"),
    "seed too large": (GOOD + "seeds: [99999999999999999999]\n", [], "seeds must be between 0 and"),
    "negative seed": (GOOD, ["--seeds", "-1"], "error: --seeds -1: seeds must be between 0 and"),
    "duplicate key": (GOOD + "seeds: [0]\nseeds: [1]\n", [], "duplicate key 'seeds'"),
    "not UTF-8": (b"name: caf\xe9\npipelines: [{name: baseline}]\n", [], "not UTF-8"),
    "unknown option": (GOOD, ["--limt", "3"], "unrecognized arguments: --limt"),
    "request timeout <= 0": (GOOD, ["--request-timeout", "0"],
                             "argument --request-timeout: must be above 0 and at most 3600 seconds, got '0'"),
    # As typed, not as parsed ('inf', '-1.0').
    "request timeout overflowing": (GOOD, ["--request-timeout", "1e400"], "seconds, got '1e400'"),
    "negative request timeout": (GOOD, ["--request-timeout", "-1"], "seconds, got '-1'"),
    "an empty --seeds item": (GOOD, ["--seeds", "0,,1"], "argument --seeds: an empty item in '0,,1'"),
    "an empty --task-ids item": (GOOD, ["--task-ids", "A,,B"], "--task-ids: an empty item in 'A,,B'"),
    "a trailing comma": (GOOD, ["--task-ids", "A,"], "argument --task-ids: an empty item in 'A,'"),
    "--limit 0": (GOOD, ["--limit", "0"], "error: --limit 0: must be >= 1"),
    "a spec's own limit 0": (GOOD + "dataset: {limit: 0}\n", [], "spec.yaml: dataset.limit: must be >= 1"
                             " (got 0)"),
    "retries out of range": (GOOD + "model: {num_retries: 99}\n", [], "model.num_retries"),
    "bad tracking field": (GOOD + "tracking: {url: x}\n", [], "tracking.url: unknown field"),
    "a misspelled required key": ("näme: x\npipelines: [{name: baseline}]\n", [],
                                  "näme: unknown field; allowed: name, description, dataset, model, "
                                  "pipelines, seeds, execution, pool, tracking, prompts, order_seed, "
                                  "concurrency, parallel_runs, strict (and 1 more problem)"),
    "aliases expanding without end": (GOOD + LAUGHS, [], "malformed YAML: its aliases expand to more than"),
    "an alias inside itself": (GOOD + "seeds: &s [1, *s]\n", [], "an alias refers to the value it is in"),
    "a long wrong value, shortened": ("name: [" + ", ".join(["abcdef"] * 5000) + "]\n", [],
                                      "name: expected a string, got ['abcdef', 'abcdef', 'abcdef', "
                                      "'abcdef', ...]"),
    "an integer too long to read": (GOOD + "dataset: {limit: " + "9" * 5000 + "}\n", [],
                                    "malformed YAML at line 3, column 18: an integer of more than 100"),
    "a name too long for a file name": ("name: " + "n" * 101 + "\npipelines: [{name: baseline}]\n", [],
                                        "spec.yaml: name: String should have at most 100 characters"),
    "a label too long for a file name": ("name: x\npipelines: [{name: baseline, label: " + "l" * 101 + "}]\n",
                                         [], "pipelines.0.label: String should have at most 100 characters"),
    "a name with a newline": ('name: "a\\nb"\npipelines: [{name: baseline}]\n', [],
                              "spec.yaml: name: holds a control character: 'a\\nb'"),
    "a label with a NUL": ('name: x\npipelines: [{name: baseline, label: "t\\0x"}]\n', [],
                           "pipelines.0.label: holds a control character: 't\\x00x'"),
    "no task ids": (GOOD + "dataset: {task_ids: []}\n", [],
                    "dataset.task_ids: must name at least one problem"),
    "a list as a key": (GOOD + "? [a, b]\n: 1\n", [], "a key that is a list or mapping (keys are names)"),
    "a mapping as a nested key": ("name: x\npipelines: [{name: baseline, params: {? {a: 1} : 2}}]\n", [],
                                  "a key that is a list or mapping"),
    "a task id twice": (GOOD + "dataset: {task_ids: [HumanEval/0, HumanEval/0]}\n", [],
                        "dataset.task_ids: HumanEval/0 given more than once"),
    "a task id twice on the command line": (GOOD, ["--task-ids", "HumanEval/1,HumanEval/1"],
                                            "HumanEval/1 given more than once"),
    "a tracking URI MLflow has no store for": (GOOD + "tracking: {uri: 'ftp://x'}\n", [],
                                                "tracking.uri: 'ftp://x': MLflow has no tracking store for "
                                                "scheme 'ftp'"),
    "a tracking URI that is a path": (GOOD + "tracking: {uri: mlruns}\n", [], "MLflow's file store"),
    "an empty dataset source": (GOOD + "dataset: {source: ''}\n", [], "dataset.source: must not be empty"),
    "nested too deeply": ("name: " + "[" * 5000 + "]" * 5000 + "\n", [], "malformed YAML: nested too deeply"),
}


@pytest.mark.parametrize("verb", ["run", "optimize"])
def test_a_spec_path_that_is_a_directory_says_so(verb, tmp_path, home, capsys):
    assert main(["--home", str(home), verb, str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"critiquelab: error: {tmp_path}: is a directory, not a spec file"
    assert not home.exists()


@pytest.mark.parametrize("verb", ["run", "optimize"])
def test_a_spec_path_that_is_a_fifo_says_so_without_reading_it(verb, tmp_path, home, capsys):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)  # reading it would block until a writer came
    assert main(["--home", str(home), verb, str(fifo)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"critiquelab: error: {fifo}: not a regular file"
    assert not home.exists()


@pytest.mark.parametrize("case", list(BAD))
def test_bad_run_input_is_one_line_exit_2_nothing_written(case, tmp_path, home, capsys):
    text, extra, expected = BAD[case]
    code = main(["--home", str(home), "run", _spec(tmp_path, text), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("critiquelab: error: ") and expected in line, line
    assert not home.exists()


@pytest.mark.parametrize("verb", [["run", "SPEC"], ["run", "SPEC", "--estimate"], ["compare", "some-run"]])
def test_a_bad_tracking_uri_from_the_environment_is_one_line(verb, tmp_path, home, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "ftp://tracking")
    args = [_spec(tmp_path, GOOD) if a == "SPEC" else a for a in verb]
    assert main(["--home", str(home), *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == ("critiquelab: error: $MLFLOW_TRACKING_URI 'ftp://tracking': MLflow has no tracking "
                    "store for scheme 'ftp'; use sqlite:///PATH, http(s)://HOST[:PORT] (a tracking "
                    "server), databricks or a database URL")
    assert not home.exists()


def test_home_and_debug_are_accepted_after_the_verb(tmp_path, capsys):
    home = tmp_path / "after"
    assert main(["compare", "no-such-run", "--home", str(home)]) == 2
    assert f"no MLflow store at {home / 'mlflow.db'}" in capsys.readouterr().err
    # --debug: the traceback, then the same line and exit code
    assert main(["compare", "no-such-run", "--home", str(home), "--debug"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.strip().splitlines()[-1].startswith("critiquelab: error: compare no-such-run: no MLflow store")


def test_ui_on_a_taken_port_is_one_line(tmp_path, home, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--port", str(port)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"cannot serve on 127.0.0.1:{port}" in line and line.endswith("pick another --port")


@pytest.mark.parametrize("host", ["bad host", "192.0.2.1"])  # no such name; an address not here
def test_ui_on_a_host_it_cannot_serve_on_blames_the_host(tmp_path, home, capsys, host):
    assert main(["ui", "--host", host]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"critiquelab: error: cannot serve on {host}:5000")
    assert line.endswith("pick another --host")
    assert not home.exists()


def test_python_api_takes_a_str_home_and_a_hostile_name_stays_inside_it(
    tmp_path, monkeypatch, humaneval_problems
):
    from critiquelab.experiments.api import run

    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        for name in ("../../escaped", str(tmp_path / "absolute")):
            spec = fake_spec(fake.api_base, limit=1, pool={"persist": False}, name=name)
            result = run(spec, home="runs/x", progress=False)  # a str, as a notebook passes it
            assert result.children[0].metrics["pass_at_1"] == 1.0
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")}
    assert written == {"runs"}, written  # nothing next to the data directory or above it
    assert not (tmp_path / "absolute").exists()


def test_the_yaml_loader_still_reads_every_shipped_spec():
    from pathlib import Path

    from critiquelab.experiments.spec.files import load_yaml

    for path in sorted(Path("experiments").glob("*.yaml")):
        assert load_yaml(path) == yaml.safe_load(path.read_text()), path
