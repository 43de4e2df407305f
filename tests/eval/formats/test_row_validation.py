"""Every row is checked before anything runs: a bad one is one line naming the row and field."""

import json
from pathlib import Path

import pytest

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import load_problems

DATA = Path(__file__).parents[1] / "data"
MISSING = object()


def _rows(name):
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


@pytest.mark.parametrize(
    ("name", "field", "value", "message"),
    [
        ("humaneval.jsonl", "prompt", 5, "field 'prompt' must be text, not a number (5)"),
        ("humaneval.jsonl", "prompt", ["def f():"], "field 'prompt' must be text, not a list"),
        ("humaneval.jsonl", "prompt", "Count the words.", "field 'prompt' is not valid Python"),
        ("humaneval.jsonl", "test", "", "field 'test' is empty"),
        ("humaneval.jsonl", "test", "  \n", "field 'test' is empty"),
        ("humaneval.jsonl", "test", "assert True\n", "field 'test' defines no function check(candidate)"),
        ("humaneval.jsonl", "test", "def check(c):\n    assert (\n", "field 'test' is not valid Python"),
        # called, these return an object without running an assert: every answer would pass
        ("humaneval.jsonl", "test", "async def check(candidate):\n    assert candidate('a') == 1\n",
         "field 'test' defines check with 'async def': calling it runs none of its asserts"),
        ("humaneval.jsonl", "test", "def check(candidate):\n    assert candidate('a') == 1\n    yield\n",
         "field 'test' defines check as a generator (it yields)"),
        # nothing in the test can fail: every answer would pass
        ("humaneval.jsonl", "test", "def check(candidate):\n    candidate('a b') == 2\n",
         "field 'test' holds no assert, raise or assert…() call (unittest's, numpy.testing's): its "
         "check would pass every answer"),
        # and these fail every answer, the right ones too
        ("humaneval.jsonl", "test", "def check():\n    pass\n",
         "field 'test' defines check without the one argument check(candidate) is called with"),
        ("humaneval.jsonl", "test", "def check(candidate, expected):\n    pass\n",
         "field 'test' defines check without the one argument"),
        ("humaneval.jsonl", "test", "def check(candidate, *, strict):\n    pass\n",
         "field 'test' defines check without the one argument"),
        # deeper than the parser's own stack: refused, not a RecursionError mid-load
        ("humaneval.jsonl", "prompt", "X = " + "-" * 5000 + "1\n",
         "field 'prompt' is not valid Python (the checker runs it for its helpers): nested too deeply"),
        # JSON's "\ud800" reads as a lone surrogate, which no store or request can encode
        ("humaneval.jsonl", "prompt", 'def f():\n    """\ud800"""\n',
         "field 'prompt' holds a lone surrogate ('\\ud800') at character 17: not Unicode text"),
        ("humaneval.jsonl", "entry_point", MISSING, "field 'entry_point' is missing"),
        ("humaneval.jsonl", "entry_point", "count words", "must be a Python function name"),
        ("humaneval.jsonl", "canonical_solution", 3, "field 'canonical_solution' must be text"),
        # the test calls entry_point on the prompt's stub completed: another name fails every answer
        ("humaneval.jsonl", "entry_point", "clamp",
         "field 'entry_point' ('clamp') names no function the prompt defines (it defines: count_words)"),
        ("humaneval.jsonl", "canonical_solution", "    return 1\n  oops\n",
         "field 'canonical_solution' does not complete the prompt into valid Python"),
        ("mbpp.jsonl", "test_list", [], "field 'test_list' is empty"),
        ("mbpp.jsonl", "test_list", "assert f(1) == 1", "field 'test_list' must be a list of text, not str"),
        ("mbpp.jsonl", "test_list", [3], "field 'test_list' item 1 must be text, not a number (3)"),
        ("mbpp.jsonl", "test_list", ["assert common_items((1,), (1,)) ==", "x"],
         "field 'test_list' item 1 is not valid Python"),
        ("mbpp.jsonl", "code", "def other(a, b):\n    return a\n",
         "field 'test_list' calls no function that field 'code' defines"),
        ("mbpp.jsonl", "test_list", ["x = common_items((1,), (1,))"],
         "field 'test_list' holds no assert, raise or assert…() call (unittest's, numpy.testing's): every "
         "answer would pass"),
        ("mbpp.jsonl", "text", None, "field 'text' is missing"),
        ("mbpp.jsonl", "code", "def common_items(a=" + "-" * 400 + "1, b=0):\n    return a\n",
         "field 'code' the signature of common_items() is nested too deeply"),
        ("mbpp.jsonl", "test_list", ["assert True", "x = '\udfff'"],
         "field 'test_list' item 2 holds a lone surrogate"),
        ("mbpp.jsonl", "challenge_test_list", "assert x", "field 'challenge_test_list' must be a list"),
        ("evalplus.jsonl", "base_input", "[[1]]", "field 'base_input' must be a list of argument lists"),
        ("evalplus.jsonl", "base_input", [1, 2], "field 'base_input' item 1 must be a list of arguments"),
        ("evalplus.jsonl", "atol", -1, "field 'atol' must be a finite number >= 0"),
        ("evalplus.jsonl", "atol", "0", "field 'atol' must be a number, not str"),
        ("evalplus.jsonl", "canonical_solution", "    return values\n  oops\n",
         "field 'canonical_solution' does not complete the prompt into valid Python"),
        ("evalplus.jsonl", "entry_point", "median",
         "field 'canonical_solution' defines no function 'median'"),
    ],
)
def test_a_bad_row_is_one_line_naming_row_task_and_field(tmp_path, name, field, value, message):
    rows = _rows(name)
    if value is MISSING:
        del rows[1][field]
    else:
        rows[1][field] = value
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError) as caught:
        load_problems(str(path))
    text = str(caught.value)
    assert text.startswith(f"dataset '{path}' row 2 (task_id {rows[1]['task_id']}): "), text
    assert message in text and "\n" not in text


@pytest.mark.parametrize("test", [
    "def check(candidate, strict=True):\n    assert candidate('a b') == 2\n",
    "def check(*candidates):\n    assert candidates[0]('a b') == 2\n",
    # a yield in a function defined inside check does not make check a generator
    "def check(candidate):\n    def cases():\n        yield 'a b'\n    for c in cases():\n"
    "        assert candidate(c) == 2\n",
    # what can fail an answer besides an assert statement: a raise, an assert…() call, a helper
    "def check(candidate):\n    if candidate('a b') != 2:\n        raise ValueError('wrong')\n",
    "import unittest\ndef check(candidate):\n    unittest.TestCase().assertEqual(candidate('a b'), 2)\n",
    "def assertion(out, exp):\n    assert out == exp\ndef check(candidate):\n"
    "    assertion(candidate('a b'), 2)\n",
])
def test_a_check_callable_with_one_argument_is_accepted(tmp_path, test):
    rows = _rows("humaneval.jsonl")
    rows[1]["test"] = test
    path = tmp_path / "humaneval.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [p.test for p in load_problems(str(path))][1] == test


def test_evalplus_row_without_any_input(tmp_path):
    row = _rows("evalplus.jsonl")[0]
    row.update(base_input=[], plus_input=[])
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(UserError, match=r"row 1 .*field 'base_input' is empty .*nothing to test"):
        load_problems(str(path))


@pytest.mark.parametrize(("task_id", "message"), [
    (None, "field 'task_id' is missing"), ("  ", "field 'task_id' is empty"),
    ([1], "field 'task_id' must be text or an integer, not a list"),
    # a task id names a problem in every table, page title and MLflow trace
    ("T/\ud800", r"field 'task_id' holds a lone surrogate \('\\ud800'\) at character 3"),
    ("T/\x00", r"field 'task_id' holds a control character: 'T/\\x00'"),
    ("a" * 201, "field 'task_id' is 201 characters long; at most 200"),
])
def test_bad_task_id(tmp_path, task_id, message):
    row = _rows("mbpp.jsonl")[0] | {"task_id": task_id}
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(UserError, match=f"^dataset '{path}' row 1: {message}"):
        load_problems(str(path))


def test_non_mapping_row_and_empty_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"task_id": "a"}\n[1, 2]\n')
    with pytest.raises(UserError, match="row 2 is not a mapping of fields"):
        load_problems(str(path))
    path.write_text("\n")
    with pytest.raises(UserError, match="has no rows"):
        load_problems(str(path))
