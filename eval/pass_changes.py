"""What changed when a run's final programs were scored again on other tests (``critiquelab
rescore``): passes lost, passes gained. Shared by the rescore itself and by ``compare``, which
shows the same block when a rescored run is compared next to the run it was rescored from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field, computed_field

LISTED_TASKS = 10  # task ids named per cell; the rest are counted


class PassChange(BaseModel):
    """One pipeline × seed, on the tasks scored both times."""

    pipeline: str = Field(description="The pipeline's label in the original run.")
    seed: int = Field(description="The run's seed.")
    problems: int = Field(description="Tasks scored both before and after.")
    passed_before: int = Field(description="Of those, passed on the original tests.")
    passed_after: int = Field(description="Of those, passed on the other tests.")
    lost: list[str] = Field(description="Task ids that passed before and fail now, in task order.")
    gained: list[str] = Field(description="Task ids that failed before and pass now, in task order.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_at_1_before(self) -> float:
        return self.passed_before / self.problems if self.problems else float("nan")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pass_at_1_after(self) -> float:
        return self.passed_after / self.problems if self.problems else float("nan")


def pass_change(
    pipeline: str, seed: int, before: Mapping[str, bool], after: Mapping[str, bool]
) -> PassChange:
    """Compare outcomes by task id; tasks only one side has are left out."""
    common = [task for task in before if task in after]
    return PassChange(
        pipeline=pipeline, seed=seed, problems=len(common),
        passed_before=sum(bool(before[t]) for t in common),
        passed_after=sum(bool(after[t]) for t in common),
        lost=[t for t in common if before[t] and not after[t]],
        gained=[t for t in common if after[t] and not before[t]],
    )


def listed(tasks: Sequence[str], limit: int = LISTED_TASKS) -> str:
    """Up to ``limit`` task ids and how many more, or "–" for none."""
    if not tasks:
        return "–"
    more = f" (+{len(tasks) - limit} more)" if len(tasks) > limit else ""
    return ", ".join(tasks[:limit]) + more


def changes_markdown(
    changes: Sequence[PassChange], labels: Mapping[tuple[str, int], str] | None = None
) -> str:
    """A Markdown table, one row per pipeline × seed. ``labels`` renames a row's pipeline (compare
    shows "original → rescored" labels)."""
    labels = labels or {}
    lines = [
        "| pipeline | seed | problems | passed before | passed after | lost | gained | pass@1 before "
        "| pass@1 after | lost tasks |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for change in changes:
        name = labels.get((change.pipeline, change.seed), change.pipeline)
        lines.append(
            f"| {name} | {change.seed} | {change.problems} | {change.passed_before} | {change.passed_after} "
            f"| {len(change.lost)} | {len(change.gained)} | {change.pass_at_1_before:.4f} "
            f"| {change.pass_at_1_after:.4f} | {listed(change.lost)} |"
        )
    return "\n".join(lines) + "\n"
