"""A data directory whose mlflow.db is no MLflow store (damaged, foreign, a directory, empty): every
verb says so in one line, exit 2, and leaves the file as it was — MLflow would create its schema
in an empty or foreign database, and a damaged file was a SQLAlchemy traceback."""

from __future__ import annotations

import json
import sqlite3

import pytest
import yaml
from support.specs import fake_spec

from critiquelab.experiments.cli.main import main

DEAD = "http://127.0.0.1:9/v1"  # never contacted: every case is refused before any model call


def _damage(path, kind):
    if kind == "random bytes":
        path.write_bytes(bytes(range(256)) * 16)
    elif kind == "a directory":
        path.mkdir()
    elif kind == "a foreign database":
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE notes (text TEXT)")
    elif kind == "a foreign database with MLflow's table names":
        with sqlite3.connect(path) as db:  # MLflow would add its other tables, then fail on these
            db.execute("CREATE TABLE experiments (id INTEGER)")
            db.execute("CREATE TABLE runs (id INTEGER)")
    else:  # an empty file
        path.touch()


def _snapshot(path):
    return "dir" if path.is_dir() else path.read_bytes()


def _commands(tmp_path, problems):
    dataset = tmp_path / "rescore.jsonl"
    dataset.write_text(json.dumps(problems[0].model_dump()) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(fake_spec(DEAD, limit=1)))
    traces = tmp_path / "traces.yaml"
    traces.write_text(yaml.safe_dump({
        "name": "opt", "pipeline": {"name": "baseline"}, "optimizer": {"name": "traces"},
        "traces": {"run_ids": ["deadbeef"]}, "split": {"seed": 0, "train": 2, "val": 2},
        "dataset": {"source": "humaneval", "limit": 6}, "model": {"id": "openai/x", "api_base": DEAD},
    }))
    return {
        "compare": ["compare", "deadbeef", "--no-log"],
        "export": ["export", "deadbeef"],
        "view": ["view", "deadbeef", "--out", str(tmp_path / "pages")],
        "rescore": ["rescore", "deadbeef", "--dataset", str(dataset), "--format", "humaneval"],
        "run --estimate": ["run", str(spec), "--estimate"],
        "optimize": ["optimize", str(traces)],
    }


KINDS = ["random bytes", "a directory", "a foreign database",
         "a foreign database with MLflow's table names", "an empty file"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_store_that_is_no_mlflow_store_is_one_line_and_left_as_it_was(
    kind, tmp_path, home, capsys, humaneval_problems
):
    home.mkdir()
    store = home / "mlflow.db"
    _damage(store, kind)
    before = _snapshot(store)
    for verb, args in _commands(tmp_path, humaneval_problems).items():
        code = main(args)
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        if kind == "an empty file" and verb == "run --estimate":
            assert code == 0, captured.err  # an empty file is where MLflow creates its store
        else:
            assert code == 2 and len(err) == 1, (verb, captured.err)
            assert err[0].startswith("critiquelab: error: ") and "Traceback" not in captured.err
            if kind != "an empty file":
                assert str(store) in err[0] and "move it aside, or pass --home" in err[0], (verb, err)
        assert _snapshot(store) == before, verb
    assert sorted(p.name for p in home.iterdir()) == ["mlflow.db"]


@pytest.mark.parametrize("kind", ["no file", "an empty file"])
def test_a_missing_store_is_named_where_it_was_looked_for(
    kind, tmp_path, home, capsys, humaneval_problems, monkeypatch
):
    """A store named by $MLFLOW_TRACKING_URI is where the readers looked: their line names that
    file, not the data directory (which holds no store)."""
    elsewhere = tmp_path / "elsewhere.db"
    if kind == "an empty file":
        elsewhere.touch()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{elsewhere}")
    commands = _commands(tmp_path, humaneval_problems)
    for verb in ("compare", "export", "view", "rescore", "optimize"):
        assert main(commands[verb]) == 2, verb
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(home) not in err[0], (verb, err)
        assert f"no MLflow store at {elsewhere} yet (run an experiment first, or pass --home)" in err[0]
    assert not home.exists() and (elsewhere.exists() == (kind == "an empty file"))
