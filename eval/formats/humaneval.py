"""The HumanEval format: each row already is a problem (``task_id, prompt, entry_point, test``,
optionally ``canonical_solution``); the loader only checks it."""

from __future__ import annotations

from critiquelab.eval.formats.base import DatasetFormat, FormatOptions
from critiquelab.eval.formats.rows import RowReader, check_function_fault, defined_functions
from critiquelab.eval.problems import Problem


def problem_from_row(row: RowReader, options: FormatOptions) -> Problem:
    task_id = row.task_id()
    prompt = row.text("prompt")
    entry_point = row.identifier("entry_point")
    test = row.text("test")
    canonical = row.optional_text("canonical_solution")
    # The trusted checker executes the prompt (for helpers the test uses) and then the test's
    # check(candidate): either failing to parse would end every sample as error/test_setup.
    stub = row.parsed("prompt", prompt, "is not valid Python (the checker runs it for its helpers)")
    # The coder completes the prompt's stub and the test calls entry_point: a row whose prompt
    # defines another function would score every answer as a missing entry point.
    if entry_point not in defined_functions(stub):
        raise row.error("entry_point", f"('{entry_point}') names no function the prompt defines "
                        f"(it defines: {', '.join(defined_functions(stub)) or 'none'})")
    if canonical is not None:
        row.parsed("canonical_solution", prompt + canonical,
                   "does not complete the prompt into valid Python")
    fault = check_function_fault(row.parsed("test", test))
    if fault is not None:
        raise row.error("test", fault)
    return Problem(task_id=task_id, prompt=prompt, entry_point=entry_point, test=test,
                   canonical_solution=canonical)


FORMAT = DatasetFormat(
    name="humaneval",
    required=("task_id", "prompt", "entry_point", "test"),
    optional=("canonical_solution",),
    build=problem_from_row,
)
