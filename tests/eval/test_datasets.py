import gzip
import json
import logging
from pathlib import Path

import pytest

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import load_problems, read_rows

DATA = Path(__file__).parent / "data"


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
MAPPING = {"task_id": "id", "prompt": "question", "entry_point": "fn", "test": "tests"}


def test_jsonl_with_field_mapping(tmp_path):
    path = tmp_path / "mine.jsonl"
    _write_jsonl(path, [ROW])
    problems = load_problems(str(path), MAPPING)
    assert problems[0].task_id == "t/1" and problems[0].entry_point == "f"


def test_missing_field_names_the_field(tmp_path):
    path = tmp_path / "mine.jsonl"
    _write_jsonl(path, [ROW])
    with pytest.raises(UserError, match="no field 'entry_point'"):
        load_problems(str(path), {"task_id": "id", "prompt": "question", "test": "tests"})


def test_parquet_and_saved_dataset(tmp_path):
    import datasets
    import pandas as pd

    frame = pd.DataFrame([{"task_id": "p/1", "prompt": "def g():\n    pass\n", "entry_point": "g",
                           "test": "def check(c):\n    assert c() is None\n"}])
    frame.to_parquet(tmp_path / "d.parquet")
    assert load_problems(str(tmp_path / "d.parquet"))[0].task_id == "p/1"
    datasets.Dataset.from_pandas(frame).save_to_disk(str(tmp_path / "saved"))
    assert load_problems(str(tmp_path / "saved"))[0].entry_point == "g"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet", "saved"]  # no cache left


def test_a_parquet_file_with_no_rows_says_so(tmp_path):
    import pandas as pd

    columns = {"task_id": [], "prompt": [], "entry_point": [], "test": []}
    pd.DataFrame(columns, dtype=str).to_parquet(tmp_path / "empty.parquet")
    with pytest.raises(UserError, match=r"^dataset '.*empty.parquet' has no rows$"):
        load_problems(str(tmp_path / "empty.parquet"))


def test_unreadable_file_is_a_user_error(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text("{not json\n")
    with pytest.raises(UserError, match="could not be read: line 1 is not JSON"):
        load_problems(str(path))


def test_a_file_nested_too_deeply_a_fifo_or_a_false_parquet_is_one_clear_error(tmp_path, capfd):
    import os

    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "whole.json").write_text(deep)
    (tmp_path / "lines.jsonl").write_text('{"task_id": "a"}\n' + deep + "\n")
    (tmp_path / "fake.parquet").write_text("not parquet\n")
    os.mkfifo(tmp_path / "pipe.jsonl")  # opening it to read would wait for a writer for ever
    for name, expected in [("whole.json", "a value is nested too deeply"),
                           ("lines.jsonl", "line 2 holds a value nested too deeply"),
                           ("pipe.jsonl", "is not a regular file or a directory"),
                           ("fake.parquet", "could not be read: Parquet magic bytes not found")]:
        with pytest.raises(UserError, match=expected):
            read_rows(str(tmp_path / name))
    assert capfd.readouterr().err == ""  # `datasets` logs nothing beside the one line the CLI prints
    with pytest.raises(UserError, match="an empty name"):
        read_rows("")  # not the current directory


def test_json_values_are_kept_exactly_as_written(tmp_path):
    """Arrow's inference would make the 3 a 3.0 (a different EvalPlus input) and the numeric
    prompt the text '5' (hiding a bad row)."""
    rows = [{"task_id": "a", "base_input": [[3], [2.5]], "prompt": "x"},
            {"task_id": 7, "base_input": [[True]], "prompt": 5}]
    _write_jsonl(tmp_path / "d.jsonl", rows)
    assert read_rows(str(tmp_path / "d.jsonl")) == rows
    assert type(read_rows(str(tmp_path / "d.jsonl"))[0]["base_input"][0][0]) is int
    (tmp_path / "list.json").write_text(json.dumps(rows, indent=2))
    assert read_rows(str(tmp_path / "list.json")) == rows
    with gzip.open(tmp_path / "d.jsonl.gz", "wt") as handle:
        handle.write("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert read_rows(str(tmp_path / "d.jsonl.gz")) == rows
    # raw U+2028 / U+0085 inside a string are valid JSON, and CRLF line ends are read too
    odd = [{"task_id": "b", "prompt": "line\u2028separator\u0085next"}, {"task_id": "c", "prompt": "y"}]
    (tmp_path / "odd.jsonl").write_text("\r\n".join(json.dumps(r, ensure_ascii=False) for r in odd),
                                        newline="")
    assert read_rows(str(tmp_path / "odd.jsonl")) == odd


@pytest.mark.parametrize(
    ("name", "expected"),
    [("mbpp.jsonl", "mbpp"), ("mbpp.parquet", "mbpp"), ("evalplus.jsonl", "evalplus"),
     ("humaneval.jsonl", "humaneval")],
)
def test_format_is_detected_from_the_columns_with_one_notice(name, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="critiquelab.eval.datasets"):
        problems = load_problems(str(DATA / name))
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1
    assert f"read as format '{expected}'" in notices[0] and name in notices[0]
    assert problems and all(p.prompt and p.test and p.entry_point for p in problems)


def test_a_bad_row_in_a_detected_format_is_one_error_that_names_the_format(tmp_path, caplog):
    rows = [json.loads(line) for line in (DATA / "evalplus.jsonl").read_text().splitlines()]
    rows[1]["base_input"] = "not a list"
    _write_jsonl(tmp_path / "bad.jsonl", rows)
    detected = r"row 2.*base_input.*\[read as format 'evalplus' \(detected: "
    with (caplog.at_level(logging.WARNING, logger="critiquelab.eval.datasets"),
          pytest.raises(UserError, match=detected)):
        load_problems(str(tmp_path / "bad.jsonl"))
    assert caplog.records == []  # no notice before it: the CLI prints one line


def test_a_task_id_missing_from_a_detected_format_is_the_only_line(caplog):
    with caplog.at_level(logging.WARNING, logger="critiquelab.eval.datasets"), \
            pytest.raises(UserError, match=r"task id\(s\) not in dataset .*\['NOPE'\]"):
        load_problems(str(DATA / "mbpp.jsonl"), task_ids=["NOPE"])
    assert caplog.records == []  # the format notice comes only once the selection stands


def test_named_format_gives_no_notice_and_wins_over_detection(caplog):
    with caplog.at_level(logging.WARNING, logger="critiquelab.eval.datasets"):
        assert len(load_problems(str(DATA / "mbpp.jsonl"), dataset_format="mbpp")) == 8
        assert len(load_problems()) == 164  # the built-in source is known to be humaneval
    assert caplog.records == []
    with pytest.raises(UserError, match=r"no field 'prompt'.*format 'humaneval'"):
        load_problems(str(DATA / "mbpp.jsonl"), dataset_format="humaneval")


def test_renamed_columns_count_for_detection(tmp_path):
    row = json.loads((DATA / "mbpp.jsonl").read_text().splitlines()[0])
    row["asserts"] = row.pop("test_list")
    _write_jsonl(tmp_path / "renamed.jsonl", [row])
    problems = load_problems(str(tmp_path / "renamed.jsonl"), {"test_list": "asserts"})
    assert problems[0].entry_point == "digit_square_sum"


def test_a_mapping_to_a_column_the_dataset_lacks_is_refused_even_for_an_optional_field():
    """Without it a misspelt optional column (mbpp's setup code) would silently drop the field."""
    with pytest.raises(UserError, match=r"dataset.fields.test_setup_code: dataset '.*mbpp.jsonl' has no "
                                        r"column 'setup'; available: \["):
        load_problems(str(DATA / "mbpp.jsonl"), {"test_setup_code": "setup"})


def test_options_that_do_not_fit_the_format_are_refused():
    with pytest.raises(UserError, match=r"unknown field\(s\) \['test'\] for format 'mbpp'"):
        load_problems(str(DATA / "mbpp.jsonl"), {"test": "tests"})
    with pytest.raises(UserError, match="challenge_tests applies to the mbpp format"):
        load_problems(str(DATA / "evalplus.jsonl"), challenge_tests=True)
    with pytest.raises(UserError, match="unknown dataset format 'apps'"):
        load_problems(str(DATA / "mbpp.jsonl"), dataset_format="apps")


def test_a_damaged_gzip_or_a_repeated_key_is_one_clear_error(tmp_path):
    import gzip

    good = gzip.compress(b'{"task_id": "a", "prompt": "x"}\n' * 200)
    (tmp_path / "cut.jsonl.gz").write_bytes(good[: len(good) // 2])  # a download cut short
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    (tmp_path / "flipped.jsonl.gz").write_bytes(bytes(flipped))
    # JSON keeps the last of two values silently: the row would not be the one its author read
    (tmp_path / "twice.jsonl").write_text('{"task_id": "a", "prompt": 5, "prompt": "def f(): pass"}\n')
    for name, expected in [("cut.jsonl.gz", "could not be read: Compressed file ended"),
                           ("flipped.jsonl.gz", "could not be read: "),
                           ("twice.jsonl", "line 1 is not JSON \\(key 'prompt' appears twice")]:
        with pytest.raises(UserError, match=expected):
            read_rows(str(tmp_path / name))
