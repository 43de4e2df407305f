"""Every argument of every verb, with a bad value: one line on stderr, exit code 2, nothing
written in the data directory. The table must name every argument the parser has (flags that
take no value aside), so a new option cannot arrive without its bad-value case."""

from __future__ import annotations

import argparse

import pytest
from support.fake_openai import FakeOpenAIServer, humaneval_responder

from critiquelab.experiments.cli.main import main
from critiquelab.experiments.cli.parser import build_parser

SPEC = "name: x\npipelines: [{name: baseline}]\nmodel: {id: openai/fake, num_retries: 0}\n"


def _arguments() -> list[tuple[str, str]]:
    """(verb, dest) of every argument that takes a value, memory's sub-verbs as ``memory VERB``."""
    def taking_values(parser: argparse.ArgumentParser, verb: str) -> list[tuple[str, str]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += taking_values(sub, f"{verb} {name}".strip())
            elif action.nargs != 0 and not isinstance(action, argparse._HelpAction) and verb:
                found.append((verb, action.dest))
        return found

    return taking_values(build_parser(), "")


def _cases(tmp_path, api_base: str) -> dict[tuple[str, str], tuple[list[str], str]]:
    """(verb, dest) -> (the command line, what its one line must say)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("openai/fake", f"openai/fake, api_base: '{api_base}'"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    run = ["run", str(spec), "--no-progress"]
    missing = str(tmp_path / "missing.yaml")
    write = ["study", "write", "--out", str(tmp_path / "study"), "--evidence", "held_out"]
    return {
        ("run", "spec"): (["run", missing], "missing.yaml"),
        ("run", "model"): ([*run, "--model", "nomodel"], "model 'nomodel'"),
        ("run", "api_base"): ([*run, "--api-base", "http://127.0.0.1:9/v1"], "is not usable at start-up"),
        ("run", "api_key_env"): ([*run, "--api-key-env", "CRITIQUELAB_UNSET_KEY"], "CRITIQUELAB_UNSET_KEY"),
        ("run", "dataset"): ([*run, "--dataset", str(tmp_path / "none.jsonl")], "not found"),
        ("run", "format"): ([*run, "--format", "csv"], "argument --format"),
        ("run", "limit"): ([*run, "--limit", "x"], "argument --limit"),
        ("run", "task_ids"): ([*run, "--task-ids", "HumanEval/9999"], "HumanEval/9999"),
        ("run", "split"): ([*run, "--split", "half"], "argument --split"),
        ("run", "seeds"): ([*run, "--seeds", "1,x"], "--seeds"),
        ("run", "concurrency"): ([*run, "--concurrency", "0"], "--concurrency 0"),
        ("run", "parallel_runs"): ([*run, "--parallel-runs", "0"], "--parallel-runs 0"),
        ("run", "ray"): ([*run, "--ray", "bogus"], "bogus"),
        ("run", "request_timeout"): ([*run, "--request-timeout", "nan"],
                                    "argument --request-timeout: must be above 0 and at most 3600 seconds, "
                                    "got 'nan'"),
        ("run", "prompts"): ([*run, "--prompts", str(a_file)], "a_file"),
        ("run", "home"): ([*run, "--home", str(a_file)], "a_file"),
        ("compare", "runs"): (["compare", "no-such-run"], "no MLflow store"),  # no run can be there
        ("compare", "out"): (["compare", "r", "--out", str(a_file)], "argument --out"),
        ("compare", "bootstrap_seed"): (["compare", "r", "--bootstrap-seed", "-1"], "--bootstrap-seed"),
        ("compare", "resamples"): (["compare", "r", "--resamples", "5"], "--resamples"),
        ("compare", "viewer_url"): (["compare", "r", "--viewer-url", "javascript:x"], "--viewer-url"),
        ("compare", "home"): (["compare", "r", "--home", str(a_file)], "a_file"),
        ("export", "target"): (["export", str(tmp_path / "nothing")], "nothing"),
        ("export", "formats"): (["export", "t", "--format", "json,bogus"], "bogus"),
        ("export", "out"): (["export", "t", "--out", str(a_file)], "argument --out"),
        ("export", "prefix"): (["export", "t", "--prefix", "a/b c"], "--prefix"),
        ("export", "home"): (["export", "t", "--home", str(a_file)], "a_file"),
        ("optimize", "spec"): (["optimize", missing], "missing.yaml"),
        ("optimize", "home"): (["optimize", str(spec), "--home", str(a_file)], "a_file"),
        ("ui", "host"): (["ui", "--host", "999.1.1.1"], "999.1.1.1"),
        ("ui", "port"): (["ui", "--port", "0"], "argument --port"),
        ("ui", "home"): (["ui", "--home", str(a_file)], "a_file"),
        ("view", "run_id"): (["view", "no-such-run"], "no MLflow store"),
        ("view", "port"): (["view", "--port", "65536"], "argument --port"),
        ("view", "out"): (["view", "--out", str(a_file)], "argument --out"),
        ("view", "home"): (["view", "--home", str(a_file)], "a_file"),
        ("models", "action"): (["models", "delete"], "argument action"),
        ("models", "name"): (["models", "fetch", "no-such-model"], "no-such-model"),
        ("models", "home"): (["models", "list", "--home", str(a_file)], "a_file"),
        ("pipelines", "home"): (["pipelines", "--home", str(a_file)], "a_file"),
        ("pipelines", "names"): (["pipelines", "debate", "no_such_pipeline"],
                                 "unknown pipeline 'no_such_pipeline'"),
        ("memory search", "text"): (["memory", "search", " "], "argument text"),
        ("memory search", "k"): (["memory", "search", "x", "--k", "0"], "--k"),
        ("memory search", "role"): (["memory", "search", "x", "--role", "nobody"], "nobody"),
        ("memory search", "type"): (["memory", "search", "x", "--type", "gossip"], "gossip"),
        ("memory search", "store"): (["memory", "search", "x", "--store", "../out"], "../out"),
        ("memory skills", "role"): (["memory", "skills", "--role", "nobody"], "nobody"),
        ("memory skills", "store"): (["memory", "skills", "--store", "../out"], "../out"),
        ("memory proposals", "store"): (["memory", "proposals", "--store", "../out"], "../out"),
        ("memory approve", "id"): (["memory", "approve", "no-such-skill"], "no-such-skill"),
        ("memory approve", "store"): (["memory", "approve", "s-1", "--store", "../out"], "../out"),
        ("memory reject", "id"): (["memory", "reject", "no-such-skill"], "no-such-skill"),
        ("memory reject", "store"): (["memory", "reject", "s-1", "--store", "../out"], "../out"),
        ("memory consolidate", "threshold"): (["memory", "consolidate", "--threshold", "1.5"], "--threshold"),
        ("memory consolidate", "stale_days"): (["memory", "consolidate", "--stale-days", "nan"],
                                               "--stale-days"),
        ("memory consolidate", "store"): (["memory", "consolidate", "--store", "../out"], "../out"),
        ("memory forget", "before"): (["memory", "forget", "--before", "yesterday"], "yesterday"),
        ("memory forget", "store"): (["memory", "forget", "--before", "2026-01-01", "--store", "../out"],
                                     "../out"),
        ("memory", "home"): (["memory", "skills", "--home", str(a_file)], "a_file"),
        ("rescore", "run_id"): (["rescore", "no-such-run", "--dataset", "humaneval"], "no MLflow store"),
        ("rescore", "dataset"): (["rescore", "r", "--dataset", str(tmp_path / "none.jsonl")], "none.jsonl"),
        ("rescore", "dataset_format"): (["rescore", "r", "--dataset", "d", "--format", "csv"], "--format"),
        ("rescore", "out"): (["rescore", "r", "--dataset", "d", "--out", str(a_file)], "argument --out"),
        ("rescore", "home"): (["rescore", "r", "--dataset", "d", "--home", str(a_file)], "a_file"),
        ("run", "study"): ([*run, "--study", str(a_file), "--evidence", "held_out"], "argument --study"),
        ("run", "evidence"): ([*run, "--evidence", "maybe"], "argument --evidence"),
        ("run", "tuned_on"): ([*run, "--tuned-on", "dev\nhalf"], "argument --tuned-on"),
        ("run", "note"): ([*run, "--note", "a\x00b"], "argument --note"),
        ("study write", "runs"): ([*write, "no-such-run"], "no MLflow store"),
        ("study write", "out"): (["study", "write", "r", "--evidence", "held_out", "--out", str(a_file)],
                                 "argument --out"),
        ("study write", "evidence"): ([*write, "r", "--evidence", "maybe"], "argument --evidence"),
        ("study write", "tuned_on"): ([*write, "r", "--tuned-on", "a\rb"], "argument --tuned-on"),
        ("study write", "note"): ([*write, "r", "--note", "a\nb"], "argument --note"),
        ("study write", "description"): ([*write, "r", "--description", "a\nb"], "argument --description"),
        ("study check", "folders"): (["study", "check", str(tmp_path / "nostudy")], "no such folder"),
        ("study show", "folder"): (["study", "show", str(a_file)], "no such folder"),
        ("study tables", "files"): (["study", "tables", str(tmp_path / "none.md"), "--root", str(tmp_path)],
                                    "is not a file"),
        ("study tables", "root"): (["study", "tables", str(a_file), "--root", str(tmp_path / "nodir")],
                                   "does not exist"),
        ("study tables", "docs"): (["study", "tables", str(a_file), "--root", str(tmp_path / "nodir"),
                                    "--docs", ""], "argument --docs"),
        ("study", "home"): (["study", "check", str(tmp_path), "--home", str(a_file)], "a_file"),
    }


def test_the_table_names_every_argument(tmp_path):
    assert set(_arguments()) - set(_cases(tmp_path, "http://127.0.0.1:9/v1")) == set()


@pytest.mark.parametrize("argument", _arguments(), ids=lambda a: f"{a[0]} --{a[1]}")
def test_a_bad_value_is_one_line_exit_2_nothing_written(argument, tmp_path, home, capsys,
                                                        humaneval_problems):
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        argv, expected = _cases(tmp_path, fake.api_base)[argument]
        code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("critiquelab: error: "), err
    assert expected in err, err
    assert not home.exists()
