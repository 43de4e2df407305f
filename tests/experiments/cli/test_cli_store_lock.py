"""A command on a data directory whose local Chroma store another critiquelab process has open:
one line naming the store, exit code 2, nothing written (no model asked, no MLflow run, no
checkpoint). Letting the next process in once the first is gone: tests/runtime/pool/test_store_lock.py."""

from __future__ import annotations

import contextlib
import subprocess

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.held_store import store_held_elsewhere
from support.specs import fake_spec

from critiquelab.experiments.cli.main import main
from critiquelab.runtime.pool.store_lock import LOCK_NAME

ADVICE = ("Chroma's local store allows one process at a time: wait for it to finish, or use another data "
          "directory (--home) or a Chroma server (pool.chroma_url)")
MEMORY = [{"name": "baseline", "memory": {"enabled": True}}]
CASES = {  # what is held: (the store under the data directory, the command, the spec's changes)
    "the pool's store, by run": ("chroma", "run", {}),
    "a memory store, by run": ("memory/chroma", "run", {"pool": {"persist": False}, "pipelines": MEMORY}),
    "a memory store, by memory search": ("memory/chroma", "memory", {}),
    "the pool's store, by optimize": ("chroma", "optimize", {}),
}


def _write_spec(tmp_path, api_base, verb, changes):
    if verb == "optimize":
        spec = {"name": "opt", "pipeline": {"name": "baseline"}, "optimizer": {"name": "bootstrap"},
                "split": {"seed": 1, "train": 3, "val": 2}, "dataset": {"source": "humaneval", "limit": 7},
                "model": {"id": "openai/fake", "api_base": api_base, "num_retries": 0}}
    else:
        spec = fake_spec(api_base, limit=1, **changes)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.mark.parametrize("case", list(CASES))
def test_a_store_open_in_another_process_refuses_the_start_with_one_line_and_writes_nothing(
    case, tmp_path, home, capsys, humaneval_problems
):
    where, verb, changes = CASES[case]
    store = home / where
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = _write_spec(tmp_path, fake.api_base, verb, changes)
        argv = ["memory", "search", "x"] if verb == "memory" else [verb, spec]
        with store_held_elsewhere(store) as holder:
            code = main(["--home", str(home), *argv])
            err = capsys.readouterr().err
            assert code == 2, err
            assert err.splitlines() == [f"critiquelab: error: the Chroma store {store} is in use by another "
                                        f"critiquelab process (pid {holder.pid}); {ADVICE}"]
        assert not fake.requests  # refused before the model was even checked
        written = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
        # The other process's lock file, and nothing else: no mlflow.db, no checkpoints, no logs.
        assert written == sorted({where, f"{where}/{LOCK_NAME}", *(["memory"] if "/" in where else [])})


def test_a_store_taken_while_the_model_is_checked_refuses_before_the_first_file(
    tmp_path, home, capsys, humaneval_problems
):
    """The early check finds no lock file on a new data directory; the lock is taken again just
    before the tracking's first file, so a process that got there in between still refuses it."""
    answer = humaneval_responder(humaneval_problems)
    with contextlib.ExitStack() as held:
        holders: list[subprocess.Popen[str]] = []

        def another_process_starts_meanwhile(messages):  # the start-up check's request
            if not holders:
                holders.append(held.enter_context(store_held_elsewhere(home / "chroma")))
            return answer(messages)

        with FakeOpenAIServer(another_process_starts_meanwhile) as fake:
            spec = _write_spec(tmp_path, fake.api_base, "run", {})
            code = main(["--home", str(home), "run", spec, "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and holders, err
        store = home / "chroma"
        assert err.splitlines() == [f"critiquelab: error: the Chroma store {store} is in use by another "
                                    f"critiquelab process (pid {holders[0].pid}); {ADVICE}"]
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == ["chroma", f"chroma/{LOCK_NAME}"]
