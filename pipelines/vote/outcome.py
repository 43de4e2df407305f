"""The per-problem figures of ``vote``: the samples and the vote on them, each sample judged on
the hidden tests after the vote (pass@k over the samples), and the generated tests when a test
writer wrote some."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Self

from pydantic import Field

from critiquelab.eval.metrics import SAMPLE_KS, pass_at_k
from critiquelab.pipelines.attribution import SELECTION_ENDS, selection_end
from critiquelab.pipelines.figure_groups import GeneratedTestFigures
from critiquelab.pipelines.outcomes import FigureGroup, Outcome, Scored


class SampleFigures(FigureGroup):
    """Several samples and a vote among them."""

    samples: int | None = Field(default=None, description="Samples drawn (the greedy answer is none).")
    largest_group: int | None = Field(default=None, description="Samples in the group the answer came from.")
    greedy_answer: float | None = Field(
        default=None,
        description="With greedy_first: 1.0 when the greedy answer passed the visible examples and was "
        "the answer (no sample drawn), else 0.0.",
    )
    samples_passed: list[bool] | None = Field(
        default=None, description="Set by the scorer: each sample on the hidden tests, in sample order."
    )

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """Unbiased pass@k over the samples (over the problems that drew at least k), and with
        greedy_first how often the greedy answer passed the visible examples and nothing was drawn."""
        metrics: dict[str, float] = {}
        greedy = [float(r.figures.greedy_answer) for r in rows if r.figures.greedy_answer is not None]
        if greedy:
            metrics["greedy_answer_rate"] = sum(greedy) / len(greedy)
        scored = [r.figures.samples_passed for r in rows if r.figures.samples_passed]
        for k in SAMPLE_KS:
            eligible = [s for s in scored if len(s) >= k]
            if eligible:
                total = sum(pass_at_k(len(s), sum(s), k) for s in eligible)
                metrics[f"samples_pass_at_{k}"] = total / len(eligible)
        return metrics

    @classmethod
    def summarise_table(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """``samples_pass@k`` pooled over seeds, with the attempts it is over
        (``samples_pass@k_attempts``: those that drew at least k samples — see
        :func:`critiquelab.eval.statistics.sample_coverage_notices`), and ``vote_agreement``: the mean share
        of the samples the answer's group holds (problems that drew no sample have no vote)."""
        out: dict[str, float] = {}
        scored = [r.figures.samples_passed for r in rows if r.figures.samples_passed]
        for k in SAMPLE_KS:
            eligible = [s for s in scored if len(s) >= k]
            if eligible:
                out[f"samples_pass@{k}"] = sum(pass_at_k(len(s), sum(s), k) for s in eligible) / len(eligible)
                out[f"samples_pass@{k}_attempts"] = len(eligible)
        votes = [r.figures for r in rows
                 if r.figures.samples and r.figures.largest_group is not None]  # no sample: no vote
        if votes:
            out["vote_agreement"] = sum((f.largest_group or 0) / (f.samples or 1) for f in votes) / len(votes)
        return out

    ENDS: ClassVar[tuple[str, ...]] = SELECTION_ENDS

    @classmethod
    def attribute(cls, row: Scored[Self]) -> str | None:
        """Where the problem ended among the samples (a greedy answer that was
        not sampled is no candidate):
        :func:`critiquelab.pipelines.attribution.selection_end`."""
        return selection_end(row.passed, row.figures.samples_passed)


class VoteOutcome(Outcome, SampleFigures, GeneratedTestFigures):
    """Figures of ``vote``."""

    samples: int = Field(description="Samples drawn (the greedy answer is none).")
    largest_group: int = Field(description="Samples in the group the answer came from.")
    messages: int = Field(description="Messages on the problem's thread.")
    visible_passing_samples: int | None = Field(
        default=None,
        description="With select: visible_filter: samples returning every visible example's value.",
    )
    tests: int | None = Field(default=None, description="With generated tests: the tests the samples ran on.")
    consensus_score: int | None = Field(
        default=None, description="With generated tests: the chosen consensus set's samples × tests passed."
    )
    selection: str | None = Field(
        default=None,
        description="With generated tests: dual_agreement, or behaviour when no set passed a test.",
    )
