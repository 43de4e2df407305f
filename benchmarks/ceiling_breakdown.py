"""Where a finished ceiling run's failures come from (issue #16): of the problems the greedy
answer fails, how many some sample among the n drawn passes (a selector could reach them) and how
many none does (beyond the model at this n), by the greedy failure's reason; and how often the
vote over the samples (their largest behaviour group on the visible examples) picks a passing one.

    critiquelab run experiments/ceiling.yaml          # prints the parent run id at the end
    .venv/bin/python benchmarks/ceiling_breakdown.py PARENT_RUN_ID [--home DIR]

Reads the child runs' per-problem tables from MLflow (nothing is run, nothing written).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.experiments.compare.runs import load_problems_frame, resolve_runs
from critiquelab.experiments.paths import data_dir
from critiquelab.experiments.tracking.store import tracking_uri


def _rows(frame, label: str) -> dict[str, dict]:
    chosen = frame[frame["pipeline"] == label]
    if chosen.empty:
        raise SystemExit(f"no pipeline '{label}' in the run (found: {sorted(set(frame['pipeline']))})")
    return {row["task_id"]: row for row in chosen.to_dict("records")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parent_run_id")
    parser.add_argument("--home", type=Path, default=None, help="the data directory (default: the usual)")
    parser.add_argument("--greedy", default="baseline", help="label of the greedy pipeline")
    parser.add_argument("--samples", default="samples20", help="label of the sampling (vote) pipeline")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(args.home or data_dir()))
    frame = load_problems_frame(client, resolve_runs(client, [args.parent_run_id]))
    greedy, samples = _rows(frame, args.greedy), _rows(frame, args.samples)
    tasks = sorted(set(greedy) & set(samples))
    if not tasks:
        raise SystemExit("the two pipelines share no problem")

    def sample_passes(task: str) -> int:
        return int(sum(bool(s) for s in samples[task]["extra.samples_passed"]))

    failed = [t for t in tasks if not greedy[t]["passed"]]
    reachable = [t for t in failed if sample_passes(t) > 0]
    print(f"problems: {len(tasks)}; greedy passes {len(tasks) - len(failed)}, fails {len(failed)}")
    print(f"greedy failures some sample passes (a selector could reach): {len(reachable)}; "
          f"the vote picks a passing sample on {sum(bool(samples[t]['passed']) for t in reachable)}")
    print(f"greedy failures no sample passes: {len(failed) - len(reachable)}")
    print("by the greedy failure's reason (reachable / all):")
    for reason, count in Counter(greedy[t]["reason"] for t in failed).most_common():
        reached = sum(greedy[t]["reason"] == reason for t in reachable)
        print(f"  {reason or '-'}: {reached} / {count}")
    lost = [t for t in tasks if greedy[t]["passed"] and not samples[t]["passed"]]
    print(f"greedy passes, the vote fails: {len(lost)} "
          f"(of them some sample passes: {sum(sample_passes(t) > 0 for t in lost)})")
    missed = [t for t in tasks if not samples[t]["passed"] and sample_passes(t) > 0]
    spread = dict(sorted(Counter(sample_passes(t) for t in missed).items()))
    print(f"the vote fails though some sample passes: {len(missed)} "
          f"(passing samples there → problems: {spread})")


if __name__ == "__main__":
    main()
