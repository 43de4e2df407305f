"""The per-problem figures of ``distinguish``: how the greedy answer was checked (samples, inputs
written and kept, groups, judgements), what was chosen, and every candidate judged on the hidden
tests after the run — so selection accuracy and right or wrong replacements can be counted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Self

from pydantic import Field

from critiquelab.pipelines.attribution import SELECTION_ENDS, selection_end
from critiquelab.pipelines.outcomes import FigureGroup, Outcome, Scored


class SelectionFigures(FigureGroup):
    """Selection among candidates scored on the hidden tests, candidate 0 the greedy answer."""

    candidates_passed: list[bool] | None = Field(
        default=None,
        description="Set by the scorer: each candidate on the hidden tests (0: the greedy answer, then "
        "the samples in seed order).",
    )
    greedy_replaced: bool | None = Field(
        default=None, description="A greedy answer that passed the visible examples was not the answer."
    )
    inputs_kept: int | None = Field(default=None, description="Generated inputs usable as calls.")
    inputs_dropped: int | None = Field(
        default=None, description="Generated inputs dropped (unparsable, wrong arity)."
    )
    judge_calls: int | None = Field(default=None, description="Pairwise judgements asked for.")

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """How often some candidate passed the hidden tests, the share of those problems whose
        answer passed (``selection_accuracy``, absent when none had one), and how often a greedy
        answer that passed the visible examples was replaced — rightly (the replacement passes,
        the greedy answer did not) or wrongly (the reverse)."""
        scored = [r for r in rows if r.figures.candidates_passed is not None
                  and r.figures.greedy_replaced is not None]
        if not scored:
            return {}
        solvable = [r for r in scored if any(r.figures.candidates_passed or [])]
        replaced = [r for r in scored if r.figures.greedy_replaced]
        outcomes = [(r.passed, bool((r.figures.candidates_passed or [False])[0])) for r in replaced]
        metrics: dict[str, float] = {
            "candidates_have_passing_rate": len(solvable) / len(scored),
            "greedy_replaced": len(replaced),
            "greedy_replaced_right": sum(answer and not greedy for answer, greedy in outcomes),
            "greedy_replaced_wrong": sum(greedy and not answer for answer, greedy in outcomes),
            "inputs_kept": sum(r.figures.inputs_kept or 0 for r in scored),
            "inputs_dropped": sum(r.figures.inputs_dropped or 0 for r in scored),
            "judge_calls": sum(r.figures.judge_calls or 0 for r in scored),
        }
        if solvable:
            metrics["selection_accuracy"] = sum(r.passed for r in solvable) / len(solvable)
        return metrics

    ENDS: ClassVar[tuple[str, ...]] = SELECTION_ENDS

    @classmethod
    def attribute(cls, row: Scored[Self]) -> str | None:
        """Where the problem ended among the greedy answer and
        the samples:
        :func:`critiquelab.pipelines.attribution.selection_end`."""
        return selection_end(row.passed, row.figures.candidates_passed)


class DistinguishOutcome(Outcome, SelectionFigures):  # type: ignore[misc]  # plugin false positive: see critiquelab.pipelines.outcomes
    """Figures of ``distinguish``."""

    samples: int = Field(description="Samples drawn (the greedy answer is none).")
    greedy_passed_visible: bool = Field(
        description="The greedy answer returned every visible example's value."
    )
    visible_passing: int = Field(description="Candidates returning every visible example's value.")
    inputs_written: int = Field(description="Inputs the input writer wrote (0: it was not asked).")
    inputs_kept: int = Field(description="Generated inputs usable as calls of the function.")
    inputs_dropped: int = Field(
        description="Generated inputs dropped (unparsable, or the signature cannot take them)."
    )
    groups: int = Field(description="Behaviour groups among the candidates selected from.")
    disagreements: int = Field(description="Inputs on which those groups' outputs differ.")
    judge_calls: int = Field(description="Pairwise judgements asked for.")
    selection: str = Field(
        description="The rule that chose (pairwise, agreement, both, or the visible filter)."
    )
    chosen: int = Field(description="The chosen candidate (0: the greedy answer, i + 1: sample i).")
    greedy_replaced: bool = Field(
        description="A greedy answer that passed the visible examples was not the answer."
    )
    messages: int = Field(description="Messages on the problem's thread.")
