"""Hub datasets by name (``hf://OWNER/NAME``), offline: a datasets cache made with a few rows in
the layout an online ``load_dataset`` leaves, then loaded by name with no ``format``/``fields``."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
from support.hub_cache import cache_hub_rows, offline_hub_cache

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import dataset_fingerprint, dataset_provenance, humaneval_path, load_problems
from critiquelab.eval.hub_datasets import HubSource
from critiquelab.eval.scoring import score_code

DATA = Path(__file__).parent / "data"
COMMIT = "7dce6050a7d6d172f3cc5c32aa97f52fa1a2e544"
OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    return offline_hub_cache(tmp_path, monkeypatch)


def _humaneval_rows(count: int) -> list[dict]:
    with gzip.open(humaneval_path(), "rt") as handle:
        return [json.loads(line) for line, _ in zip(handle, range(count), strict=False)]


def _mbpp_rows() -> list[dict]:
    return [json.loads(line) for line in (DATA / "mbpp.jsonl").read_text().splitlines()]


def test_humaneval_by_name_is_humaneval(cache, caplog):
    cache_hub_rows(cache, "openai/openai_humaneval", _humaneval_rows(3), config="openai_humaneval",
                   revision=COMMIT)
    with caplog.at_level(logging.WARNING):
        problems = load_problems("hf://openai/openai_humaneval")
    assert problems == load_problems("humaneval", limit=3)
    assert "detected" not in caplog.text  # a standard set's format is known, not guessed


def test_humanevalplus_reads_its_test_column_as_the_hidden_test(cache):
    row = {**_humaneval_rows(1)[0], "task_id": "HumanEval/0",
           "test": "def check(candidate):\n    for args, expected in [(([1.0, 2.8], 0.5), False), "
                   "(([1.0, 1.2], 0.3), True)]:\n        assert candidate(*args) is expected\n"}
    cache_hub_rows(cache, "evalplus/humanevalplus", [row], config="default", revision=COMMIT)
    (problem,) = load_problems("hf://evalplus/humanevalplus")
    assert problem.test == row["test"]
    assert score_code(problem, problem.canonical_solution, 5.0)[1].passed


def test_mbpp_full_by_default_and_sanitized_by_config(cache):
    full = _mbpp_rows()
    sanitized = [{"task_id": r["task_id"], "prompt": r["text"] + " (sanitized)", "code": r["code"],
                  "test_list": r["test_list"], "test_imports": []}
                 for r in full if not r.get("test_setup_code")]
    cache_hub_rows(cache, "google-research-datasets/mbpp", full, config="full", revision=COMMIT)
    cache_hub_rows(cache, "google-research-datasets/mbpp", sanitized, config="sanitized", revision=COMMIT)
    assert load_problems("hf://google-research-datasets/mbpp") == load_problems(str(DATA / "mbpp.jsonl"))
    read = load_problems(HubSource("google-research-datasets/mbpp", config="sanitized"))
    assert [p.task_id for p in read] == [str(r["task_id"]) for r in sanitized]
    assert all("(sanitized)" in p.prompt for p in read)
    with pytest.raises(UserError, match="unknown config 'nope'; known: full, sanitized"):
        load_problems(HubSource("google-research-datasets/mbpp", config="nope"))


def test_mbppplus_runs_its_plus_program(cache):
    row = {"task_id": 2, "prompt": "Write a function to add two integers.", "source_file": "x.ipynb",
           "code": "def add(a, b):\n    return a + b", "test_imports": [],
           "test_list": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
           "test": "inputs = [[1, 2], [-3, 1]]\nresults = [3, -2]\n"
                   "for inp, exp in zip(inputs, results):\n    assert add(*inp) == exp\n"}
    cache_hub_rows(cache, "evalplus/mbppplus", [row], config="default", revision=COMMIT)
    (problem,) = load_problems("hf://evalplus/mbppplus")
    assert problem.task_id == "2" and problem.prompt.startswith("def add(a, b):\n")
    assert "Write a function to add two integers." in problem.prompt
    assert score_code(problem, problem.canonical_solution, 5.0)[1].passed
    # Passes test_list (no negative input), fails the plus program.
    assert not score_code(problem, "def add(a, b):\n    return abs(a + b)\n", 5.0)[1].passed


def test_other_names_load_with_format_and_fields(cache):
    rows = [{"id": "t/1", "question": "def f():\n    '''one'''\n", "fn": "f",
             "tests": "def check(c):\n    assert c() == 1\n"}]
    cache_hub_rows(cache, "someone/problems", rows, config="default", revision=COMMIT)
    mapping = {"task_id": "id", "prompt": "question", "entry_point": "fn", "test": "tests"}
    (problem,) = load_problems("hf://someone/problems", mapping, dataset_format="humaneval")
    assert problem.task_id == "t/1" and problem.entry_point == "f"


def test_fingerprint_and_revision_tell_commits_configs_and_splits_apart(tmp_path, monkeypatch):
    rows = _humaneval_rows(2)
    fingerprints = []
    for number, (revision, split) in enumerate([(COMMIT, "test"), (OTHER_COMMIT, "test"), (COMMIT, "dev")]):
        cache = offline_hub_cache(tmp_path / str(number), monkeypatch)
        cache_hub_rows(cache, "openai/openai_humaneval", rows, config="openai_humaneval",
                       revision=revision, split=split)
        source = HubSource("openai/openai_humaneval", split=split)
        logged = dataset_provenance(source)
        assert logged == {"dataset.fingerprint": dataset_fingerprint(source), "dataset.revision": revision,
                          "dataset.config": "openai_humaneval", "dataset.hf_split": split}
        fingerprints.append(logged["dataset.fingerprint"])
    assert len(set(fingerprints)) == 3
    # The same copy read again is the same dataset.
    assert dataset_fingerprint(HubSource("openai/openai_humaneval", split="dev")) == fingerprints[2]


def test_a_pinned_revision_must_be_the_cached_one_offline(cache):
    cache_hub_rows(cache, "openai/openai_humaneval", _humaneval_rows(1), config="openai_humaneval",
                   revision=COMMIT)
    assert load_problems(HubSource("openai/openai_humaneval", revision=COMMIT[:8]))
    pinned = f"revision 'v1.0' is not the one in the local .* cache \\({COMMIT}\\)"
    with pytest.raises(UserError, match=pinned):
        load_problems(HubSource("openai/openai_humaneval", revision="v1.0"))


def test_not_cached_and_offline_is_one_line_saying_how_to_get_it(cache):
    with pytest.raises(UserError) as caught:
        load_problems("hf://evalplus/mbppplus")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("dataset 'hf://evalplus/mbppplus' is not in the local Hugging Face cache "
                              "and offline mode is on")
    assert "datasets.load_dataset('evalplus/mbppplus', split='test')" in message
    assert ".jsonl/.parquet" in message
    assert not cache.exists() or not any(cache.glob("evalplus___mbppplus*"))


def test_a_config_not_cached_is_the_same_line_naming_the_config(cache):
    cache_hub_rows(cache, "google-research-datasets/mbpp", _mbpp_rows(), config="full", revision=COMMIT)
    with pytest.raises(UserError, match=r"load_dataset\('google-research-datasets/mbpp', 'sanitized', "
                                        r"split='test'\).*Available configs in the cache: \['full'\]"):
        load_problems(HubSource("google-research-datasets/mbpp", config="sanitized"))


def test_a_split_the_dataset_lacks_is_named(cache):
    cache_hub_rows(cache, "openai/openai_humaneval", _humaneval_rows(1), config="openai_humaneval",
                   revision=COMMIT)
    with pytest.raises(UserError, match=r"has no split 'train'; its splits: \['test'\]"):
        load_problems(HubSource("openai/openai_humaneval", split="train"))


@pytest.mark.parametrize("source", ["hf://", "hf://a/b/c", "hf://owner/na me", "hf:///x"])
def test_a_malformed_name_is_refused(source):
    with pytest.raises(UserError, match="expected hf://OWNER/NAME"):
        load_problems(source)


@pytest.mark.parametrize(("name", "problem"), [
    ("json", "is a file loader of `datasets`, not a Hub repository"),
    ("csv", "is a file loader of `datasets`, not a Hub repository"),
    ("eval", "is a file loader of `datasets`"),
    ("rows", "is a local path, which `datasets` would read instead of the Hub repository"),
])
def test_a_name_datasets_would_read_as_local_files_is_refused(cache, tmp_path, monkeypatch, capfd,
                                                              name, problem):
    """``hf://json`` (a loader) or ``hf://rows`` with ./rows present would parse the working
    directory's files as the dataset."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "x.json").write_text('{"a": 1}\n')
    with pytest.raises(UserError, match=f"dataset 'hf://{name}': '{name}' {problem}"):
        load_problems(f"hf://{name}")
    assert capfd.readouterr().err == ""  # nothing of `datasets`' own logging either
