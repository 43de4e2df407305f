import json

import pytest

from eval.datasets import load_problems
from eval.errors import UserError


def test_humaneval_has_164_problems(humaneval_problems):
    assert len(humaneval_problems) == 164
    assert humaneval_problems[0].task_id == "HumanEval/0"
    assert all(p.test and p.entry_point for p in humaneval_problems)


def test_limit_and_task_ids():
    assert [p.task_id for p in load_problems(limit=2)] == ["HumanEval/0", "HumanEval/1"]
    chosen = load_problems(task_ids=["HumanEval/5", "HumanEval/3"])
    assert [p.task_id for p in chosen] == ["HumanEval/3", "HumanEval/5"]


def test_unknown_task_id_is_a_user_error():
    with pytest.raises(UserError, match="HumanEval/999"):
        load_problems(task_ids=["HumanEval/999"])


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


ROW = {"id": "t/1", "question": "def f():\n    '''one'''\n", "fn": "f",
       "tests": "def check(c):\n    assert c() == 1\n"}


def test_jsonl_with_field_mapping(tmp_path):
    path = tmp_path / "mine.jsonl"
    _write_jsonl(path, [ROW])
    problems = load_problems(
        str(path), {"task_id": "id", "prompt": "question", "entry_point": "fn", "test": "tests"},
        cache_dir=tmp_path / "cache",
    )
    assert problems[0].task_id == "t/1" and problems[0].entry_point == "f"


def test_missing_field_names_the_field(tmp_path):
    path = tmp_path / "mine.jsonl"
    _write_jsonl(path, [ROW])
    with pytest.raises(UserError, match="no field 'entry_point'"):
        load_problems(str(path), {"task_id": "id", "prompt": "question", "test": "tests"},
                      cache_dir=tmp_path / "cache")


def test_parquet_and_saved_dataset(tmp_path):
    import datasets
    import pandas as pd

    frame = pd.DataFrame([{"task_id": "p/1", "prompt": "def g():\n", "entry_point": "g",
                           "test": "def check(c):\n    pass\n"}])
    frame.to_parquet(tmp_path / "d.parquet")
    assert load_problems(str(tmp_path / "d.parquet"), cache_dir=tmp_path / "c")[0].task_id == "p/1"
    datasets.Dataset.from_pandas(frame).save_to_disk(str(tmp_path / "saved"))
    assert load_problems(str(tmp_path / "saved"))[0].entry_point == "g"


def test_unreadable_file_is_a_user_error(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text("{not json\n")
    with pytest.raises(UserError, match="could not be read"):
        load_problems(str(path), cache_dir=tmp_path / "cache")
