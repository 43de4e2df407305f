"""Which compared runs are rescores of which (``critiquelab rescore`` tags each rescored pipeline
run with the run it was rescored from), and the block ``compare`` adds for them: the passes each
pipeline lost on the other, usually stronger, tests. A comparison without such a pair is left
exactly as it was."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from critiquelab.eval.pass_changes import PassChange, changes_markdown, pass_change

RESCORED_FROM_TAG = "critiquelab.rescored_from"  # on a rescored run: the run id it rescored
LOST_PASSES_HEADING = "Passes lost on stronger tests"


def rescore_pairs(client: Any, runs: Sequence[Any]) -> list[tuple[Any, Any]]:
    """(original, rescored) for each compared run rescored from another compared run."""
    by_id = {run.run_id: run for run in runs}
    pairs = []
    for run in runs:
        source = client.get_run(run.run_id).data.tags.get(RESCORED_FROM_TAG)
        if source in by_id:
            pairs.append((by_id[source], run))
    return pairs


def _outcomes(problems: Any, run_id: str) -> dict[str, bool]:
    rows = problems[problems["run_id"] == run_id]
    return {str(task): bool(passed) for task, passed in zip(rows["task_id"], rows["passed"], strict=True)}


def lost_passes_section(
    client: Any, runs: Sequence[Any], problems: Any, out: Path, files: dict[str, Path]
) -> str:
    """The Markdown block (empty when no compared run is a rescore of another), also written as
    ``lost_passes.csv`` and into ``report.html``. ``runs`` are compare's ``ComparedRun``s,
    ``problems`` its per-problem frame."""
    import pandas as pd

    from critiquelab.eval.report import add_html_section, frame_html

    pairs = rescore_pairs(client, runs)
    if not pairs:
        return ""
    changes: list[PassChange] = []
    labels = {}
    for original, rescored in pairs:
        change = pass_change(original.label, original.seed, _outcomes(problems, original.run_id),
                             _outcomes(problems, rescored.run_id))
        changes.append(change)
        labels[(original.label, original.seed)] = f"{original.label} → {rescored.label}"
    frame = pd.DataFrame([
        {"pipeline": labels[(c.pipeline, c.seed)], **c.model_dump(exclude={"pipeline", "lost", "gained"}),
         "lost": " ".join(c.lost), "gained": " ".join(c.gained)}
        for c in changes
    ])
    files["lost_passes"] = out / "lost_passes.csv"
    frame.to_csv(files["lost_passes"], index=False)
    add_html_section(files["html"], f"<h2>{LOST_PASSES_HEADING}</h2>{frame_html(frame)}")
    return (
        f"\n## {LOST_PASSES_HEADING}\n\nEach rescored run (`critiquelab rescore`) next to the run it was "
        "rescored from: the same final programs on the other dataset's tests, over the tasks both "
        "scored. Lost: passed the original tests, fails the other ones.\n\n"
        + changes_markdown(changes, labels)
    )
