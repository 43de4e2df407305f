"""The stored result schema is versioned and every older version is read through one migration
(critiquelab.eval.result_schema): a checkpoint file and a per-problem table written by the code of b4cabf8,
before versions were stored (tests/eval/data/results_v1), read back as they were written."""

import json
from pathlib import Path

import pandas as pd
import pytest

from critiquelab.core.errors import UserError
from critiquelab.eval.result_schema import RESULT_SCHEMA, upgrade_record, upgrade_table
from critiquelab.eval.results import ProblemResult, ResolvedParams, results_from_table, results_table
from critiquelab.eval.verdict import Status

V1 = Path(__file__).parent / "data" / "results_v1"


def _as_a_table_keeps(result):
    """What a per-problem table keeps of a result: not token reuse, the thread or resolved params."""
    return result.model_copy(update={
        "reused_prompt_tokens": 0, "reuse_reported_prompt_tokens": 0, "thread_id": "", "truncated_replies": 0,
        "resolved_params": ResolvedParams(),
    })


def _v1_lines():
    text = (V1 / "checkpoints" / "debate__seed0.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_checkpoint_line_of_the_unversioned_schema_reads_with_every_field():
    first, second = (ProblemResult.model_validate_json(json.dumps(line)) for line in _v1_lines())
    assert (first.task_id, first.status, first.isolation, first.thread_id) == (
        "HumanEval/0", Status.PASSED, "bwrap", "t-0")
    assert first.extra == {"consensus": True, "agreement": [0.5, 1.0], "judge_decision": "chosen",
                           "debaters_final_passed": [True, False], "messages": 9, "unparsed_steps": 0}
    assert first.usage_by_role == {"judge": {"calls": 1.0, "prompt_tokens": 400.0, "completion_tokens": 60.0}}
    assert second.resolved_params == ResolvedParams(token_budget=1234.5)
    assert (second.reason, second.detail, second.truncated_replies) == ("assertion", "expected 2", 1)
    for line, result in zip(_v1_lines(), (first, second), strict=True):
        assert result.schema_version == RESULT_SCHEMA
        # Everything it held is kept as it was: the current dump is the old line plus the version.
        assert json.loads(result.model_dump_json(exclude={"schema_version"})) == line


def test_what_is_written_now_carries_the_version_and_reads_back_equal():
    [result] = [ProblemResult.model_validate(line) for line in _v1_lines()[:1]]
    written = json.loads(result.model_dump_json())
    assert written["schema_version"] == RESULT_SCHEMA
    assert ProblemResult.model_validate_json(result.model_dump_json()) == result
    table = results_table([result])
    assert table["schema_version"].tolist() == [RESULT_SCHEMA]
    assert results_from_table(table) == [_as_a_table_keeps(result)]


def test_a_table_of_the_unversioned_schema_reads_into_the_same_results_as_its_checkpoints():
    table = pd.read_parquet(V1 / "problems.parquet")
    assert "schema_version" not in table
    checkpointed = [ProblemResult.model_validate(line) for line in _v1_lines()]
    assert results_from_table(table) == [_as_a_table_keeps(r) for r in checkpointed]
    upgraded = upgrade_table(table)
    assert upgraded["schema_version"].tolist() == [RESULT_SCHEMA] * 2
    assert list(upgraded.columns[:-1]) == list(table.columns)


def test_isolation_among_the_figures_moves_to_its_field_and_column_in_one_step():
    line = {**_v1_lines()[0], "extra": {"isolation": "none", "consensus": True}}
    del line["isolation"]
    assert upgrade_record(line)["isolation"] == "none"
    assert upgrade_record(line)["extra"] == {"consensus": True}
    # Tables of both versions concatenated: each row keeps its own value.
    old = results_table([ProblemResult.model_validate(line)]).rename(columns={"isolation": "extra.isolation"})
    old = old.drop(columns=["schema_version"])
    new = results_table([ProblemResult.model_validate(_v1_lines()[1])])
    both = upgrade_table(pd.concat([old, new], ignore_index=True))
    assert both["isolation"].tolist() == ["none", "bwrap"] and "extra.isolation" not in both
    read = results_from_table(pd.concat([old, new], ignore_index=True))
    assert [r.isolation for r in read] == ["none", "bwrap"]


@pytest.mark.parametrize("version", [RESULT_SCHEMA + 1, 0, "2", True])
def test_a_version_this_code_does_not_write_is_refused_not_guessed(version):
    line = {**_v1_lines()[0], "schema_version": version}
    with pytest.raises(UserError, match="schema_version"):
        ProblemResult.model_validate(line)
