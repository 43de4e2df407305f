"""How well does distinguish select, and which of its rules would have done best on the same
candidates? Replays a finished run of ``distinguish`` (e.g. experiments/distinguishing_selection.yaml)
with no model call.

From each distinguish run's per-problem table (every candidate scored on the hidden tests after
the run, candidate 0 the greedy answer): pass@1, selection accuracy (the answer passes, over the
problems where some candidate passes), and greedy answers that passed the visible examples but
were replaced — rightly (the replacement passes, the greedy answer did not) or wrongly (the
reverse), by :class:`critiquelab.pipelines.distinguish.outcome.DistinguishOutcome`'s run metrics, the run
summary's own definition.

From its message log (each verdict records the groups, their outcomes on every input and the
judgements), each rule is replayed over that run's candidates: ``greedy`` (candidate 0),
``visible`` (vote's greedy-first visible filter, the 0.750 rule), ``agreement`` (recomputed from
the outcomes), ``pairwise`` and ``both`` (from the recorded judgements, so only over a run that
made them: pairwise or both), each paired with the visible rule (McNemar). The rule the run used
must reproduce its own answers; a mismatch is printed.

    .venv/bin/python benchmarks/distinguishing_replay.py PARENT_RUN_ID [--home DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.eval.results import ProblemResult
from critiquelab.eval.statistics import mcnemar_exact
from critiquelab.eval.verdict import Status
from critiquelab.experiments.compare.runs import load_problems_frame, resolve_runs
from critiquelab.experiments.paths import data_dir
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.pipelines.distinguish.outcome import DistinguishOutcome
from critiquelab.pipelines.distinguish.selection import (
    GREEDY,
    Group,
    Tournament,
    agreement_winner,
    answer_of,
    combined_answer,
)

RULES = ("greedy", "visible", "agreement", "pairwise", "both")


def replay(verdict: dict[str, Any]) -> dict[str, int | None]:
    """Each rule's answer (a candidate number) from one recorded verdict; None where the rule
    needs judgements the run did not make."""
    found = verdict["metadata"]
    groups = [Group(g["members"], tuple(tuple(o) for o in g["outcomes"]), tuple(g["visible_passed"]))
              for g in found["groups"]]
    answers: dict[str, int | None] = {"greedy": GREEDY, "visible": found["visible_choice"]}
    if len(groups) < 2:  # one program, one group or no usable input: every rule answers alike
        return {**answers, "agreement": found["chosen"], "pairwise": found["chosen"], "both": found["chosen"]}
    visible = found["visible_inputs"]
    agreement = agreement_winner(groups, visible)
    answers["agreement"] = answer_of(agreement)
    judgements = found["judgements"]
    if not judgements:  # an agreement run: nobody asked the judge
        return {**answers, "pairwise": None, "both": None}
    tournament = Tournament(groups, visible)
    for judgement in judgements:
        assert (tournament.winner, tournament.challenger) == (judgement["a"], judgement["b"]), judgement
        tournament.judged(judgement["choice"])
    answers["pairwise"] = tournament.chosen.answer
    answers["both"] = combined_answer(groups, tournament.chosen, agreement)
    return answers


def _verdicts(client: Any, run_id: str) -> dict[str, dict[str, Any]]:
    log = Path(client.download_artifacts(run_id, "messages.jsonl"))
    messages = [json.loads(line) for line in log.read_text().splitlines()]
    return {m["task_id"]: m for m in messages if m["intent"] == "verdict"}


def _as_result(row: dict[str, Any]) -> ProblemResult:
    extra = {key.removeprefix("extra."): row[key] for key in
             ("extra.candidates_passed", "extra.greedy_replaced", "extra.inputs_kept", "extra.inputs_dropped",
              "extra.judge_calls")}
    extra["candidates_passed"] = [bool(p) for p in extra["candidates_passed"]]
    return ProblemResult(task_id=row["task_id"], pipeline=row["pipeline"], seed=int(row["seed"]),
                         status=Status(row["status"]), extra=extra)


def report(label: str, rows: list[dict[str, Any]], verdicts: dict[str, dict[str, Any]]) -> None:
    figures = DistinguishOutcome.run_metrics([_as_result(row) for row in rows])
    passed = sum(bool(row["passed"]) for row in rows)
    accuracy = figures.get("selection_accuracy")
    print(f"\n{label}: {len(rows)} problems, pass@1 {passed / len(rows):.4f}; selection accuracy "
          f"{'–' if accuracy is None else f'{accuracy:.4f}'} (some candidate passes on "
          f"{figures['candidates_have_passing_rate'] * len(rows):.0f}); greedy answers replaced: "
          f"{figures['greedy_replaced']:.0f} (rightly {figures['greedy_replaced_right']:.0f}, wrongly "
          f"{figures['greedy_replaced_wrong']:.0f}); inputs kept {figures['inputs_kept']:.0f}, dropped "
          f"{figures['inputs_dropped']:.0f}; judge calls {figures['judge_calls']:.0f}")
    answers = {row["task_id"]: replay(verdicts[row["task_id"]]) for row in rows}
    # The rule the run decided by (where several groups made it decide) must give its answers back.
    mismatched = [row["task_id"] for row in rows if row["extra.selection"] in RULES
                  and answers[row["task_id"]][row["extra.selection"]] != row["extra.chosen"]]
    if mismatched:
        print(f"  the replay differs from the run's own answer on {len(mismatched)} problems: "
              f"{', '.join(mismatched[:5])}")

    def passes(row: dict[str, Any], rule: str) -> bool:
        return bool(row["extra.candidates_passed"][answers[row["task_id"]][rule]])

    print("| rule | replayed on | pass@1 | vs visible rule: only visible / only rule | McNemar p |")
    print("|---|---|---|---|---|")
    for rule in RULES:
        replayable = [row for row in rows if answers[row["task_id"]][rule] is not None]
        if not replayable:
            print(f"| {rule} | 0 | – (needs judgements this run did not make) | – | – |")
            continue
        outcome = [passes(row, rule) for row in replayable]
        base = [passes(row, "visible") for row in replayable]
        test = mcnemar_exact(base, outcome)
        print(f"| {rule} | {len(replayable)} | {sum(outcome) / len(replayable):.4f} | {test.only_a} / "
              f"{test.only_b} | {test.pvalue:.2g} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parent_run_id")
    parser.add_argument("--home", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(args.home or data_dir()))
    runs = resolve_runs(client, [args.parent_run_id])
    frame = load_problems_frame(client, runs)
    chosen = [run for run in runs if "extra.greedy_replaced" in frame
              and frame.loc[frame["pipeline"] == run.label, "extra.greedy_replaced"].notna().any()]
    if not chosen:
        print(f"error: no distinguish run under {args.parent_run_id}", file=sys.stderr)
        raise SystemExit(2)
    for run in chosen:
        rows = frame[frame["pipeline"] == run.label].to_dict("records")
        report(run.label, rows, _verdicts(client, run.run_id))


if __name__ == "__main__":
    main()
