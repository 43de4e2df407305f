"""Five scripted tasks with a weak test file and a stronger one (EvalPlus format), shared by the
rescore and study tests (tests/experiments/test_rescore.py says what each task shows)."""

from __future__ import annotations

import json

from critiquelab.eval.datasets import load_problems

# task: (function, docstring, the run's answer, weak test's call and expected, strong inputs, reference)
TASKS = {
    "R/0": ("absolute", "Return |x|.", "return abs(x)", ("3", "3"), [[3], [-2], [0]], "return abs(x)"),
    "R/1": ("magnitude", "Return |x|.", "return x", ("4", "4"), [[4], [-5]], "return abs(x)"),
    "R/2": ("double", "Return 2 * x.", "return None", ("2", "4"), [[2]], "return 2 * x"),
    "R/3": ("triple", "Return 3 * x.", "return 3 * x", ("1", "4"), [[1], [2]], "return 3 * x"),
    "R/4": ("negate", "Return -x.", "return -x", ("1", "-1"), None, "return -x"),
    "R/9": ("square", "Return x * x.", None, None, [[3]], "return x * x"),
}


def prompt_of(name: str, doc: str) -> str:
    return f'def {name}(x: int) -> int:\n    """{doc}"""\n'


def write_rows(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def write_datasets(tmp_path):
    """(weak humaneval-format file, stronger evalplus-format file, the run's scripted answers)."""
    weak, strong, answers = [], [], []
    for task, (name, doc, answer, weak_test, inputs, reference) in TASKS.items():
        prompt = prompt_of(name, doc)
        if answer is not None:
            call, expected = weak_test
            weak.append({"task_id": task, "prompt": prompt, "entry_point": name,
                         "canonical_solution": f"    {reference}\n",
                         "test": f"def check(candidate):\n    assert candidate({call}) == {expected}\n"})
            answers.append({**weak[-1], "canonical_solution": f"    {answer}\n"})
        if inputs is not None:
            strong.append({"task_id": task, "prompt": prompt, "entry_point": name,
                           "canonical_solution": f"    {reference}\n", "base_input": inputs[:1],
                           "plus_input": inputs[1:]})
    answers_file = write_rows(tmp_path / "answers.jsonl", answers)
    return (write_rows(tmp_path / "weak.jsonl", weak), write_rows(tmp_path / "strong.jsonl", strong),
            load_problems(answers_file, dataset_format="humaneval"))
