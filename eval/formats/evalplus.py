"""The EvalPlus format (HumanEval+ / MBPP+ release files): ``task_id, prompt, entry_point,
canonical_solution, base_input`` and optionally ``plus_input, atol``; ``contract``, ``test``
and other columns are not read.

The hidden test is differential: every input of ``base_input + plus_input`` (each a list of
arguments) is given to the candidate and its output compared with the canonical solution's
output on the same input, computed in the trusted checker (``critiquelab.eval.sandbox.reference``), with
``atol`` where given. The prompt is the dataset's own (HumanEval+: HumanEval's stub; MBPP+:
the task and its first assert in a docstring), so the visible examples are what it shows.
"""

from __future__ import annotations

import json
from typing import Any

from critiquelab.eval.formats.base import DatasetFormat, FormatOptions
from critiquelab.eval.formats.rows import RowReader, defined_functions
from critiquelab.eval.problems import Problem


def _inputs(row: RowReader, field: str, *, required: bool) -> list[list[Any]]:
    value = row.raw(field)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        what = "is missing" if value is None else "must be a list of argument lists"
        raise row.error(field, what)
    for index, args in enumerate(value, start=1):
        if not isinstance(args, list):
            raise row.error(field, f"item {index} must be a list of arguments, not {type(args).__name__}")
    return value


def build_test(source: str, entry_point: str, inputs: list[list[Any]], atol: float) -> str:
    """``check(candidate)``: expected outputs come from ``source`` run on the trusted side, when
    the test module loads. Failures name the input by position only, never its value."""
    return (
        "import json\n\n"
        "from critiquelab.eval.sandbox.reference import reference_outputs, same_output\n\n"
        f"_INPUTS = json.loads({json.dumps(inputs)!r})\n"
        f"_EXPECTED = reference_outputs({source!r}, {entry_point!r}, _INPUTS)\n"
        f"_ATOL = {atol!r}\n\n\n"
        "def check(candidate):\n"
        "    for index, (args, expected) in enumerate(zip(_INPUTS, _EXPECTED), start=1):\n"
        "        assert same_output(candidate(*args), expected, _ATOL), (\n"
        "            f\"hidden input {index} of {len(_INPUTS)}: the output differs from the \"\n"
        "            \"reference solution's\"\n"
        "        )\n"
    )


def problem_from_row(row: RowReader, options: FormatOptions) -> Problem:
    task_id = row.task_id()
    prompt = row.text("prompt")
    entry_point = row.identifier("entry_point")
    canonical = row.text("canonical_solution")
    inputs = _inputs(row, "base_input", required=True) + _inputs(row, "plus_input", required=False)
    if not inputs:
        raise row.error("base_input", "is empty (and there is no plus_input): nothing to test")
    atol = row.number("atol", 0.0)
    row.parsed("prompt", prompt, "is not valid Python (the checker runs it for its helpers)")
    source = prompt + canonical
    reference = row.parsed("canonical_solution", source, "does not complete the prompt into valid Python")
    if entry_point not in defined_functions(reference):
        raise row.error("canonical_solution", f"defines no function '{entry_point}' (with the prompt)")
    try:
        json.dumps(inputs, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise row.error("base_input", f"holds a value that is not plain data: {exc}") from exc
    return Problem(task_id=task_id, prompt=prompt, entry_point=entry_point,
                   test=build_test(source, entry_point, inputs, atol), canonical_solution=canonical)


FORMAT = DatasetFormat(
    name="evalplus",
    required=("task_id", "prompt", "entry_point", "canonical_solution", "base_input"),
    optional=("plus_input", "atol"),
    build=problem_from_row,
)
