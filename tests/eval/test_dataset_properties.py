"""Property test: whatever rows a dataset file holds, loading gives valid problems or one
UserError line naming the row — never another exception, never a problem that cannot be run."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import load_problems

GOOD = {
    "task_id": "T/0", "prompt": 'def add(a, b):\n    """Add."""\n', "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
    "text": "Add two numbers.", "code": "def add(a, b):\n    return a + b\n",
    "test_list": ["assert add(1, 2) == 3"],
}
odd = st.one_of(
    st.none(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20), st.booleans(),
    st.lists(st.text(max_size=10), max_size=3), st.just(""), st.just("def check(:"),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(sorted(GOOD)), odd, max_size=4), min_size=1, max_size=3),
       st.sampled_from([None, "humaneval", "mbpp"]))
def test_rows_load_as_problems_or_one_line(overrides, dataset_format):
    rows = [{**GOOD, "task_id": f"T/{i}", **override} for i, override in enumerate(overrides)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        try:
            problems = load_problems(str(path), dataset_format=dataset_format)
        except UserError as error:
            assert "\n" not in str(error).strip() and str(path) in str(error), str(error)
            return
    for problem in problems:  # accepted: every field a prompt and a test can be built from
        assert problem.prompt.strip() and problem.test.strip() and problem.entry_point.isidentifier()
        compile(problem.test, "<test>", "exec")
