"""``critiquelab rescore RUN_ID --dataset FILE``: a thin layer over
:func:`critiquelab.experiments.rescore.runs.rescore_run`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from critiquelab.experiments.cli.arg_types import dataset_format, output_dir


def add_rescore_parser(commands: Any) -> None:
    rescore = commands.add_parser(
        "rescore", help="score a finished run's final programs on another dataset's tests (no model call)"
    )
    rescore.add_argument("run_id", help="a pipeline run id, a parent run id (each pipeline run rescored), or "
                         "a study folder (its final programs, from its files alone; nothing logged)")
    rescore.add_argument("--dataset", required=True,
                         help="'humaneval', a .jsonl/.parquet/saved-dataset path or hf://OWNER/NAME with the "
                         "same task ids, e.g. HumanEval+ in EvalPlus format or hf://evalplus/humanevalplus")
    rescore.add_argument("--format", dest="dataset_format", type=dataset_format, metavar="FORMAT",
                         help="the dataset's format (default: detected from its columns)")
    rescore.add_argument("--out", type=output_dir,
                         help="where summary.md and changes.csv go "
                         "(default <data dir>/reports/rescore-<new run id>)")


def _print(source: str, notices: list[str], dataset: str, dataset_format: str, table: str) -> None:
    for notice in notices:
        print(f"critiquelab: note: {notice}", file=sys.stderr)
    print(f"Rescore of {source} on {dataset} ({dataset_format}):\n")
    print(table)


def cmd_rescore(args: argparse.Namespace) -> int:
    from critiquelab.experiments.rescore.runs import rescore_run, rescore_study
    from critiquelab.experiments.studies.read import is_study

    if is_study(args.run_id):  # a committed study: from its files, nothing logged
        scored = rescore_study(args.run_id, args.dataset, dataset_format=args.dataset_format, out=args.out,
                               home=args.home)
        _print(f"study {args.run_id}", scored.notices, scored.dataset, scored.dataset_format, scored.table())
        print(f"files in {scored.out_dir}")
        return 0
    result = rescore_run(args.run_id, args.dataset, dataset_format=args.dataset_format, home=args.home,
                         out=args.out)
    _print(result.source_run_id, result.notices, result.dataset, result.dataset_format, result.table())
    print(f"MLflow run {result.run_id} (experiment {result.experiment_id}); files in {result.out_dir}")
    print("see the passes lost next to the original: "
          f"critiquelab compare {result.source_run_id} {result.run_id}")
    return 0
