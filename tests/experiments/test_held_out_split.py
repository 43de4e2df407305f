"""The held-out protocol (issue #31): `dataset.split` / `--split` picks the dev half (even
positions in the dataset's order) or the test half (odd positions), before task ids and limit,
without changing any checkpoint key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import load_problems
from critiquelab.eval.held_out import select_split
from critiquelab.experiments.api import load_experiment, run
from critiquelab.experiments.checkpoints import checkpoint_key, input_fingerprints
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.serving.provision import resolve_model
from critiquelab.experiments.spec.overrides import RunOverrides
from critiquelab.experiments.tracking.store import PARENT_TAG, tracking_uri

# Not in sorted order: the split follows the file's order, whatever the ids say.
SCRIPTED_IDS = ["S/q", "S/b", "S/x", "S/a", "S/m", "S/c"]


def _scripted_dataset(tmp_path):
    """Six humaneval-format problems: ``add_<i>(x)`` returns ``x + i``."""
    path = tmp_path / "scripted.jsonl"
    rows = []
    for number, task_id in enumerate(SCRIPTED_IDS):
        name = f"add_{number}"
        rows.append({
            "task_id": task_id, "entry_point": name,
            "prompt": f'def {name}(x: int) -> int:\n    """Return x + {number}."""\n',
            "canonical_solution": f"    return x + {number}\n",
            "test": f"def check(candidate):\n    assert candidate(1) == {1 + number}\n",
        })
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_dev_is_the_even_positions_and_test_the_odd_in_file_order(tmp_path):
    path = str(_scripted_dataset(tmp_path))
    dev = [p.task_id for p in load_problems(path, dataset_format="humaneval", split="dev")]
    test = [p.task_id for p in load_problems(path, dataset_format="humaneval", split="test")]
    assert dev == ["S/q", "S/x", "S/m"] and test == ["S/b", "S/a", "S/c"]
    assert [p.task_id for p in load_problems(path, dataset_format="humaneval")] == SCRIPTED_IDS


def test_humaneval_dev_is_the_even_task_numbers_and_test_the_odd(humaneval_problems):
    dev, test = select_split(humaneval_problems, "dev"), select_split(humaneval_problems, "test")
    assert len(dev) == len(test) == 82
    assert [p.task_id for p in dev] == [f"HumanEval/{n}" for n in range(0, 164, 2)]
    assert [p.task_id for p in test] == [f"HumanEval/{n}" for n in range(1, 164, 2)]


def test_split_comes_before_task_ids_and_limit():
    assert [p.task_id for p in load_problems(split="test", limit=2)] == ["HumanEval/1", "HumanEval/3"]
    picked = load_problems(split="dev", task_ids=["HumanEval/4", "HumanEval/0"])
    assert [p.task_id for p in picked] == ["HumanEval/0", "HumanEval/4"]
    with pytest.raises(UserError, match=r"not in the test split of dataset 'humaneval'.*HumanEval/2"):
        load_problems(split="test", task_ids=["HumanEval/2"])


def test_split_is_not_part_of_the_checkpoint_key():
    base = {"name": "x", "pipelines": [{"name": "baseline"}],
            "model": {"id": "openai/fake", "api_base": "http://127.0.0.1:9/v1"}}
    keys = set()
    for split in ("all", "dev", "test"):
        spec = load_experiment(base, overrides=RunOverrides(split=split))
        assert spec.dataset.split == split
        fingerprints = input_fingerprints(spec, "sqlite:///unused.db")
        keys.add(checkpoint_key(spec, resolve_model(spec.model), fingerprints))
    assert len(keys) == 1


def test_a_dev_run_then_an_all_run_reuses_the_dev_problems(tmp_path, home):
    path = str(_scripted_dataset(tmp_path))
    problems = load_problems(path, dataset_format="humaneval")

    def asked(requests):
        texts = ["\n".join(str(m.get("content", "")) for m in body.get("messages", [])) for body in requests]
        return [p.task_id for text in texts for p in problems if p.prompt.strip() in text]

    with FakeOpenAIServer(humaneval_responder(problems)) as fake:
        spec = fake_spec(fake.api_base, limit=None, pool={"persist": False})
        spec["dataset"] = {"source": path, "format": "humaneval"}
        dev = run(spec, progress=False, overrides=RunOverrides(split="dev"))
        asked_by_dev = asked(fake.requests)
        everything = run(spec, progress=False)
        asked_by_all = asked(fake.requests)[len(asked_by_dev):]

    assert [r.task_id for r in dev.children[0].results] == ["S/q", "S/x", "S/m"]
    assert sorted(asked_by_dev) == ["S/m", "S/q", "S/x"]
    assert sorted(asked_by_all) == ["S/a", "S/b", "S/c"]  # only the test half was asked for
    by_task = {r.task_id: r for r in everything.children[0].results}
    assert [r.task_id for r in everything.children[0].results] == SCRIPTED_IDS
    for result in dev.children[0].results:  # the very records the dev run checkpointed
        assert by_task[result.task_id].thread_id == result.thread_id
        assert by_task[result.task_id].latency_s == result.latency_s
    client = MlflowClient(tracking_uri(home))
    assert client.get_run(dev.parent_run_id).data.params["dataset.split"] == "dev"
    assert client.get_run(dev.children[0].run_id).data.params["dataset.split"] == "dev"
    assert client.get_run(everything.parent_run_id).data.params["dataset.split"] == "all"
    assert client.get_run(dev.children[0].run_id).data.tags[PARENT_TAG] == dev.parent_run_id


def test_estimate_with_split_names_it_in_its_header_line(tmp_path, home, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "split-estimate", "pipelines": [{"name": "baseline"}]}))
    assert main(["--home", str(home), "run", str(path), "--estimate", "--split", "test",
                 "--limit", "5"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Estimate for 'split-estimate' on ")
    assert ", dataset split test (" in printed[0]
    assert printed[2].split()[:4] == ["baseline", "0", "5", "0"]
    assert main(["--home", str(home), "run", str(path), "--estimate", "--limit", "5"]) == 0
    assert "dataset split" not in capsys.readouterr().out  # all: the header as it always was


@pytest.mark.parametrize(
    ("spec_text", "extra", "expected"),
    [
        ("name: x\npipelines: [{name: baseline}]\n", ["--split", "train"],
         "argument --split: invalid choice: 'train'"),
        ("name: x\npipelines: [{name: baseline}]\ndataset: {split: train}\n", [],
         "dataset.split: must be one of all, dev, test (got 'train')"),
        ("name: x\npipelines: [{name: baseline}]\n", ["--split", "test", "--task-ids", "HumanEval/2"],
         "not in the test split of dataset 'humaneval'"),
    ],
)
def test_bad_split_is_one_line_exit_2_nothing_written(tmp_path, home, capsys, spec_text, extra, expected):
    path = tmp_path / "spec.yaml"
    path.write_text(spec_text)
    assert main(["--home", str(home), "run", str(path), *extra]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("critiquelab: error: ") and expected in line, line
    assert not home.exists()


def test_a_split_that_holds_no_problem_is_refused_before_anything_is_written(tmp_path, home, capsys):
    """A one-row dataset's test half is empty: without the refusal the run started, logged an
    empty run and failed on its summary."""
    data = Path(__file__).parents[1] / "eval" / "data" / "humaneval.jsonl"
    one = tmp_path / "one.jsonl"
    one.write_text(data.read_text().splitlines()[0] + "\n")
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\npipelines: [{name: baseline}]\n")
    assert main(["--home", str(home), "run", str(path), "--dataset", str(one), "--split", "test"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"the test split of dataset '{one}' holds no problem" in line, line
    assert not home.exists()
