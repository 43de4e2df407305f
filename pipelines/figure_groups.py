"""Figure groups several pipelines share, each with the metrics it summarises into (see
:class:`critiquelab.pipelines.outcomes.FigureGroup`): a first version revised into a final one, tests a role
wrote, and per-problem counts that add up over a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

from pydantic import Field

from critiquelab.eval.metrics import applicable, rate
from critiquelab.pipelines.attribution import REVISION_ENDS, revision_end
from critiquelab.pipelines.outcomes import FigureGroup, Scored


class RevisionFigures(FigureGroup):
    """A pipeline that revises its first version (its outcome gives ``first_code``)."""

    first_passed: bool | None = Field(
        default=None, description="Set by the scorer: whether the first version passed the hidden tests."
    )
    changes_requested: bool | None = Field(default=None, description="Whether a review asked for changes.")
    messages: int | None = Field(default=None, description="Messages on the problem's thread.")
    fixes: int | None = Field(
        default=None, description="Revised versions (where the pipeline counts them: also a retry that "
        "no review asked for, such as reflexion's after failing visible examples).",
    )
    final_unchanged: bool | None = Field(
        default=None, description="Set by the scorer: whether the final code is the first version "
        "again, formatting and comments aside (an echo of the draft).",
    )

    ENDS: ClassVar[tuple[str, ...]] = REVISION_ENDS

    @classmethod
    def attribute(cls, row: Scored[Self]) -> str | None:
        """Kept passing, broken by a revision, a critic miss (no change asked for a failing first
        version), an echo, a repair miss, or fixed
        (:func:`critiquelab.pipelines.attribution.revision_end`)."""
        figures = row.figures
        asked = bool(figures.changes_requested) or bool(figures.fixes)
        return revision_end(figures.first_passed, row.passed, revision_asked=asked,
                            unchanged=figures.final_unchanged)

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """Critique success rate: of problems whose first version failed and where a review asked
        for changes, the share whose final code passes; harmful-revision rate: of problems whose
        first version passed, the share whose final code fails; first-version pass@1, the counts
        behind both, and messages per problem."""
        scored = [r for r in rows if r.figures.first_passed is not None]
        if not scored:
            return {}
        first_pass = [r for r in scored if r.figures.first_passed]
        challenged = [r for r in scored if not r.figures.first_passed and r.figures.changes_requested]
        harmed = [r for r in first_pass if not r.passed]
        rescued = [r for r in challenged if r.passed]
        metrics: dict[str, float] = {
            "first_pass_at_1": len(first_pass) / len(scored),
            "harmful_revisions": len(harmed),
            "critique_rescues": len(rescued),
            "changes_requested_problems": sum(bool(r.figures.changes_requested) for r in scored),
        }
        if first_pass:
            metrics["harmful_revision_rate"] = len(harmed) / len(first_pass)
        if challenged:
            metrics["critique_success_rate"] = len(rescued) / len(challenged)
        messages = [r.figures.messages for r in scored if r.figures.messages is not None]
        if messages:
            metrics["messages_per_problem"] = sum(messages) / len(messages)
        return metrics

    @classmethod
    def summarise_table(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """The run's definitions, pooled over seeds."""
        scored = [r for r in rows if r.figures.first_passed is not None]
        if not scored:
            return {}
        first = [bool(r.figures.first_passed) for r in scored]
        passed = [r.passed for r in scored]
        asked = [not f and bool(r.figures.changes_requested) for f, r in zip(first, scored, strict=True)]
        return applicable({
            "first_pass@1": sum(first) / len(first),
            "critique_success_rate": rate(passed, asked),
            "harmful_revision_rate": rate([not p for p in passed], first),
        })


class GeneratedTestFigures(FigureGroup):
    """A pipeline whose roles write tests (its outcome gives ``generated_test_code``)."""

    generated_tests: int | None = Field(
        default=None,
        description="Set by the scorer: usable tests ('assert f(args) == literal') the role wrote.",
    )
    generated_tests_correct: int | None = Field(
        default=None,
        description="Set by the scorer: how many of them the dataset's reference solution passes "
        "(absent without a reference solution or a usable test).",
    )

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """How many tests were written, and the share the reference solution passes — absent
        when no problem had both a usable test and a reference solution."""
        written = [r.figures for r in rows if r.figures.generated_tests is not None]
        if not written:
            return {}
        metrics: dict[str, float] = {"generated_tests": sum(f.generated_tests or 0 for f in written)}
        checked = [f for f in written if f.generated_tests_correct is not None]
        total = sum(f.generated_tests or 0 for f in checked)
        if total:
            metrics["generated_test_accuracy"] = sum(f.generated_tests_correct or 0 for f in checked) / total
        return metrics

    @classmethod
    def summarise_table(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """The run's accuracy, pooled over seeds."""
        checked = [r.figures for r in rows
                   if r.figures.generated_tests is not None and r.figures.generated_tests_correct is not None]
        total = float(sum(f.generated_tests or 0 for f in checked))
        if not total:
            return {}
        correct = float(sum(f.generated_tests_correct or 0 for f in checked))
        return {"generated_test_accuracy": correct / total}


def counted_totals(rows: Sequence[Scored[Any]]) -> dict[str, float]:
    """Run totals of per-problem counts (every field of the rows' group): a real 0 when a count
    was recorded and never seen; a count no problem recorded is left out."""
    if not rows:
        return {}
    names = type(rows[0].figures).model_fields
    totals: dict[str, float] = {}
    for name in names:
        recorded = [getattr(r.figures, name) for r in rows if getattr(r.figures, name) is not None]
        if recorded:
            totals[name] = sum(recorded)
    return totals
