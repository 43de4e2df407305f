"""Which selection rule gets most out of the same samples? Replays a finished vote run's samples
(issue #16's ceiling: 20 per problem) under other rules that use only what the prompt shows, with
no model call: each sample runs once more on the prompt's visible examples in the sandbox, and
whether it passes the hidden tests is the run's own record (``samples_passed``).

Rules, at the first k samples (k = 5, 10, 20 where drawn):
- ``vote``: the largest group behaving alike on the visible inputs (the vote pipeline's rule,
  replayed as a check: at the full k it must reproduce the run's answers);
- ``filter+vote``: the largest such group among the samples that return the expected value on
  every visible example (AlphaCode's filter, then clustering); none passing: ``vote``;
- ``greedy, then filter+vote``: the greedy answer when it passes every visible example, else
  ``filter+vote`` (no sample is needed when the greedy answer passes).
Each is paired with the greedy answer (McNemar) on the problems both ran.

    .venv/bin/python benchmarks/selection_replay.py PARENT_RUN_ID [--home DIR]
        [--greedy baseline] [--samples samples20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.eval.behaviour import filtered_largest_group, largest_group, visible_verdicts
from critiquelab.eval.statistics import mcnemar_exact
from critiquelab.experiments.compare.runs import load_problems_frame, resolve_runs
from critiquelab.experiments.paths import data_dir
from critiquelab.experiments.tracking.store import tracking_uri


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parent_run_id")
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--greedy", default="baseline")
    parser.add_argument("--samples", default="samples20")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(args.home or data_dir()))
    runs = {run.label: run for run in resolve_runs(client, [args.parent_run_id])}
    frame = load_problems_frame(client, [runs[args.greedy], runs[args.samples]])
    rows = {(r["pipeline"], r["task_id"]): r for r in frame.to_dict("records")}
    log = Path(client.download_artifacts(runs[args.samples].run_id, "messages.jsonl"))
    prompts, samples = {}, defaultdict(list)
    for line in log.read_text().splitlines():
        message = json.loads(line)
        if message["intent"] == "task_assignment":
            prompts[message["task_id"]] = (message["content"], message["metadata"]["entry_point"])
        elif message["intent"] == "proposal":  # in sample order: the order samples_passed is in
            samples[message["task_id"]].append(message["content"])
    tasks = sorted(t for t in samples if (args.greedy, t) in rows and (args.samples, t) in rows)

    def replay(task: str) -> dict:
        prompt, entry_point = prompts[task]
        seen = visible_verdicts(prompt, entry_point, samples[task])
        greedy_code = rows[(args.greedy, task)]["final_code"]
        greedy_visible = visible_verdicts(prompt, entry_point, [greedy_code])[0][1]
        return {"fingerprints": [s[0] for s in seen], "visible": [s[1] for s in seen],
                "greedy_visible": greedy_visible}

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        replays = dict(zip(tasks, pool.map(replay, tasks), strict=True))

    greedy = [bool(rows[(args.greedy, t)]["passed"]) for t in tasks]
    recorded = [bool(rows[(args.samples, t)]["passed"]) for t in tasks]
    print(f"problems: {len(tasks)}; greedy pass@1 {sum(greedy) / len(tasks):.4f}; the run's vote "
          f"{sum(recorded) / len(tasks):.4f}; greedy passes the visible examples on "
          f"{sum(replays[t]['greedy_visible'] for t in tasks)}")
    print("| rule | k | pass@1 | vs greedy: only greedy / only rule | McNemar p |")
    print("|---|---|---|---|---|")
    most = max(len(samples[t]) for t in tasks)
    for k in [k for k in (5, 10, 20) if k <= most]:
        for rule in ("vote", "filter+vote", "greedy, then filter+vote"):
            outcome = []
            for task, greedy_passed in zip(tasks, greedy, strict=True):
                seen, passed = replays[task], rows[(args.samples, task)]["extra.samples_passed"]
                if rule.startswith("greedy") and seen["greedy_visible"]:
                    outcome.append(greedy_passed)
                    continue
                fingerprints, visible = seen["fingerprints"][:k], seen["visible"][:k]
                group = (largest_group(fingerprints) if rule == "vote"
                         else filtered_largest_group(fingerprints, visible))
                chosen = group[0] if group else 0
                outcome.append(bool(passed[chosen]))
            test = mcnemar_exact(greedy, outcome)
            print(f"| {rule} | {k} | {sum(outcome) / len(tasks):.4f} | {test.only_a} / {test.only_b} | "
                  f"{test.pvalue:.2g} |")
            if rule == "vote" and k == most and outcome != recorded:
                differ = sum(a != b for a, b in zip(outcome, recorded, strict=True))
                print(f"  (the replayed vote differs from the run's on {differ} problems: "
                      "sandbox timing on a loaded machine)")


if __name__ == "__main__":
    main()
