"""Runs on a Hub dataset by name (``dataset.source: hf://…`` or ``--dataset hf://…``), offline:
what is not cached is one line and exit 2 with nothing written; what is cached runs, and the
run logs which copy it read (fingerprint, commit, config, split)."""

from __future__ import annotations

import gzip
import json

import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.hub_cache import cache_hub_rows, offline_hub_cache
from support.specs import fake_spec

from critiquelab.eval.datasets import humaneval_path, load_problems
from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.tracking.store import tracking_uri

COMMIT = "7dce6050a7d6d172f3cc5c32aa97f52fa1a2e544"
NEWER_COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUMANEVAL = "hf://openai/openai_humaneval"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    return offline_hub_cache(tmp_path, monkeypatch)


def _cache_humaneval(cache, revision: str, count: int = 2) -> None:
    with gzip.open(humaneval_path(), "rt") as handle:
        rows = [json.loads(line) for line, _ in zip(handle, range(count), strict=False)]
    cache_hub_rows(cache, "openai/openai_humaneval", rows, config="openai_humaneval", revision=revision)


def _one_line_refusal(capsys, home, *args: str) -> str:
    code = main(["--home", str(home), "run", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("critiquelab: error: ")
    assert not home.exists()  # nothing written: no store, no checkpoint, no Arrow cache
    return line


def test_an_uncached_name_offline_is_one_line_exit_2_and_nothing_written(cache, capsys, home):
    line = _one_line_refusal(capsys, home, "experiments/baseline.yaml", "--dataset", "hf://evalplus/mbppplus")
    assert "dataset 'hf://evalplus/mbppplus' is not in the local Hugging Face cache" in line
    assert "datasets.load_dataset('evalplus/mbppplus', split='test')" in line and ".jsonl/.parquet" in line


@pytest.mark.parametrize(("dataset", "expected"), [
    ({"source": "humaneval", "config": "sanitized"},
     "dataset: config: only for an hf://OWNER/NAME source, not 'humaneval'"),
    ({"source": "d.jsonl", "hf_split": "train", "revision": "abc"},
     "dataset: hf_split, revision: only for an hf://OWNER/NAME source"),
    ({"source": "hf://a/b/c"}, "dataset: dataset 'hf://a/b/c': expected hf://OWNER/NAME"),
])
def test_hub_fields_without_a_hub_source_are_refused(tmp_path, capsys, home, dataset, expected):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "x", "pipelines": [{"name": "baseline"}], "dataset": dataset}))
    assert expected in _one_line_refusal(capsys, home, str(spec))


def test_a_cached_name_runs_and_logs_the_copy_it_read(cache, tmp_path, home):
    _cache_humaneval(cache, COMMIT)
    problems = load_problems("humaneval", limit=2)
    with FakeOpenAIServer(humaneval_responder(problems)) as fake:
        spec = fake_spec(fake.api_base, limit=None, pool={"persist": False})
        spec["dataset"] = {"source": HUMANEVAL}
        first = run(spec, progress=False)
        _cache_humaneval(cache, NEWER_COMMIT)  # a newer commit of the set, read from now on
        second = run(spec, progress=False)

    assert [r.task_id for r in first.children[0].results] == ["HumanEval/0", "HumanEval/1"]
    assert first.children[0].metrics["pass_at_1"] == 1.0
    client = MlflowClient(tracking_uri(home))
    logged = [client.get_run(r.parent_run_id).data.params for r in (first, second)]
    assert [p["dataset.revision"] for p in logged] == [COMMIT, NEWER_COMMIT]
    assert all(p["dataset.config"] == "openai_humaneval" and p["dataset.hf_split"] == "test" for p in logged)
    assert all(p["config.dataset.source"] == HUMANEVAL for p in logged)
    # Another commit is another dataset: its own fingerprint, its own checkpoints.
    assert logged[0]["dataset.fingerprint"] != logged[1]["dataset.fingerprint"]
    keys = [client.get_run(r.parent_run_id).data.tags["critiquelab.checkpoint_key"] for r in (first, second)]
    assert keys[0] != keys[1]
    assert not list(home.rglob("*.arrow"))  # the rows stay in the library's cache


def test_dataset_flag_takes_a_hub_name(cache, tmp_path, home, capsys):
    _cache_humaneval(cache, COMMIT, count=1)
    problems = load_problems("humaneval", limit=1)
    with FakeOpenAIServer(humaneval_responder(problems)) as fake:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=None, pool={"persist": False})))
        code = main(["--home", str(home), "run", str(spec), "--dataset", HUMANEVAL, "--no-progress"])
    assert code == 0, capsys.readouterr().err
    parent = MlflowClient(tracking_uri(home)).search_runs(
        [MlflowClient(tracking_uri(home)).get_experiment_by_name("test-experiment").experiment_id],
        filter_string="tags.`critiquelab.checkpoint_key` != ''",
    )[0]
    assert parent.data.params["dataset.revision"] == COMMIT
    assert parent.data.params["problems"] == "1"
