"""benchmarks/evalplus_snapshot.py: EvalPlus's early repository files become an evalplus-format file
whose extra inputs are only those the task's contract accepts, and which rescoring reads."""

import json
import sys

from benchmarks.evalplus_snapshot import main
from critiquelab.eval.datasets import load_problems
from critiquelab.eval.scoring import score_code

CONTRACT = '\n    assert threshold > 0, "invalid inputs" # $_CONTRACT_$\n'
REFERENCE = ("\n    for i, a in enumerate(numbers):\n        for b in numbers[i + 1:]:\n"
             "            if abs(a - b) < threshold:\n                return True\n    return False\n")
HANGS = "\n    while True:\n        pass\n"


def _snapshot(directory, rows, inputs):
    directory.mkdir()
    (directory / "HumanEvalPlus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (directory / "HumanEvalPlusInputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in inputs))


def test_contract_refused_inputs_are_dropped_and_the_file_scores_programs(tmp_path, humaneval_problems,
                                                                          capsys):
    first = {"contract": CONTRACT, "reference": REFERENCE, "base_input": [[[1.0, 2.0, 3.9], 0.3]], "atol": 0}
    second = {"contract": "", "reference": HANGS, "base_input": [["()"]], "atol": 0}
    kept = [[[1.0, 1.05], 0.1], [[1.0, 5.0, 5.05], 0.1]]
    extra = [{"task_id": "HumanEval_0", "inputs": [kept[0], [[1.0, 2.0], -1.0], kept[1]]},
             {"task_id": "HumanEval_1", "inputs": [["(())"]]}]
    _snapshot(tmp_path / "snap", [first, second], extra)
    out = tmp_path / "plus.jsonl"
    limit = sys.get_int_max_str_digits()
    assert main([str(tmp_path / "snap"), str(out), "--input-timeout", "0.2"]) == 0
    assert sys.get_int_max_str_digits() == limit  # lifted only while it reads the inputs
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["HumanEval/0", "HumanEval/1"]
    assert rows[0]["plus_input"] == kept  # threshold -1 is refused by the contract
    assert rows[1]["plus_input"] == []  # the reference hangs on it: dropped, not waited for
    assert rows[0]["prompt"] == humaneval_problems[0].prompt
    assert "2 tasks (1 with extra inputs)" in capsys.readouterr().out
    _snapshot(tmp_path / "base", [first], [])  # the same task without extra inputs
    assert main([str(tmp_path / "base"), str(tmp_path / "base.jsonl")]) == 0
    (plus,) = load_problems(str(out), dataset_format="evalplus", limit=1)
    (base,) = load_problems(str(tmp_path / "base.jsonl"), dataset_format="evalplus")
    right = humaneval_problems[0].prompt + humaneval_problems[0].canonical_solution
    wrong = humaneval_problems[0].prompt + "    return numbers[1] - numbers[0] < threshold\n"
    assert score_code(plus, right, 10)[1].passed and score_code(base, right, 10)[1].passed
    assert score_code(base, wrong, 10)[1].passed  # the base input cannot tell it apart
    assert not score_code(plus, wrong, 10)[1].passed  # [1.0, 5.0, 5.05] can


def test_a_missing_file_or_field_is_one_line_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere"), str(tmp_path / "out.jsonl")]) == 2
    _snapshot(tmp_path / "snap", [{"reference": "x"}], [])
    assert main([str(tmp_path / "snap"), str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("evalplus_snapshot: error: ") for line in err)
    assert "no base_input, contract" in err[1]
    assert not (tmp_path / "out.jsonl").exists()
