"""The per-problem figures of ``debate``: agreement per round, consensus, and each debater's first
and final solution judged on the hidden tests after the debate (flips, consensus correctness)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Self

from pydantic import Field

from critiquelab.eval.metrics import applicable, rate
from critiquelab.pipelines.attribution import SELECTION_ENDS, selection_end
from critiquelab.pipelines.outcomes import FigureGroup, Outcome, Scored


class ConsensusFigures(FigureGroup):
    """Debaters converging (or not), and whether converging means being right."""

    consensus: bool | None = Field(
        default=None, description="Whether a majority of debaters' final solutions behave alike."
    )
    final_in_majority: bool | None = Field(
        default=None, description="Whether the answer behaves like that majority (False without consensus)."
    )
    agreement: list[float] | None = Field(
        default=None,
        description="Per round (proposals first), the share of debaters in the largest group behaving alike "
        "on the visible examples.",
    )
    debaters_first_passed: list[bool] | None = Field(
        default=None, description="Set by the scorer: each debater's proposal on the hidden tests."
    )
    debaters_final_passed: list[bool] | None = Field(
        default=None, description="Set by the scorer: each debater's final solution on the hidden tests."
    )

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """How often debaters converge, whether converging means being right (consensus
        correctness), and how often debating flips a debater's solution between correct and
        wrong. ``final_in_majority_rate`` is over the debates that reached consensus (a majority to
        be in), as in compare's table."""
        debates = [r for r in rows if r.figures.consensus is not None]
        if not debates:
            return {}
        n = len(debates)
        agreed = [r for r in debates if r.figures.consensus]
        metrics: dict[str, float] = {
            "consensus_rate": len(agreed) / n,
            "consensus_correctness": sum(r.passed for r in agreed) / n,
        }
        if agreed:
            in_majority = sum(bool(r.figures.final_in_majority) for r in agreed)
            metrics["final_in_majority_rate"] = in_majority / len(agreed)
        final_agreement = [r.figures.agreement[-1] for r in debates if r.figures.agreement]
        if final_agreement:
            metrics["mean_final_agreement"] = sum(final_agreement) / len(final_agreement)
        flips = [
            (bool(first), bool(final)) for r in debates
            for first, final in zip(r.figures.debaters_first_passed or [],
                                    r.figures.debaters_final_passed or [], strict=False)
        ]
        if flips:
            metrics["flips_correct_to_wrong"] = sum(first and not final for first, final in flips)
            metrics["flips_wrong_to_correct"] = sum(final and not first for first, final in flips)
        return metrics

    @classmethod
    def summarise_table(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """The run's consensus figures pooled over seeds, the agreement of the first and last
        round, and flip rates over the debaters that started correct (resp. wrong)."""
        out: dict[str, float | None] = {}
        scored = [r for r in rows if r.figures.consensus is not None]
        if scored:
            consensus = [bool(r.figures.consensus) for r in scored]
            passed = [r.passed for r in scored]
            out["consensus_rate"] = sum(consensus) / len(scored)
            right = sum(c and p for c, p in zip(consensus, passed, strict=True))
            out["consensus_correctness"] = right / len(scored)
            if any(r.figures.final_in_majority is not None for r in rows):
                in_majority = [bool(r.figures.final_in_majority) for r in scored]
                out["final_in_majority_rate"] = rate(in_majority, consensus)
        rounds = [r.figures.agreement for r in rows if r.figures.agreement]
        if rounds:
            out["agreement_initial"] = sum(r[0] for r in rounds) / len(rounds)
            out["agreement_final"] = sum(r[-1] for r in rounds) / len(rounds)
        pairs = [r.figures for r in rows if r.figures.debaters_first_passed is not None
                 and r.figures.debaters_final_passed is not None]
        first = [bool(v) for f in pairs for v in f.debaters_first_passed or []]
        final = [bool(v) for f in pairs for v in f.debaters_final_passed or []]
        if first and len(first) == len(final):
            out["flips_correct_to_wrong"] = sum(a and not b for a, b in zip(first, final, strict=True))
            out["flips_wrong_to_correct"] = sum(b and not a for a, b in zip(first, final, strict=True))
            out["flip_c2w_rate"] = rate([not b for b in final], first)
            out["flip_w2c_rate"] = rate(final, [not a for a in first])
        return applicable(out)

    ENDS: ClassVar[tuple[str, ...]] = SELECTION_ENDS

    @classmethod
    def attribute(cls, row: Scored[Self]) -> str | None:
        """Where the problem ended among the debaters' final solutions
        (what the judge chose from):
        :func:`critiquelab.pipelines.attribution.selection_end`."""
        return selection_end(row.passed, row.figures.debaters_final_passed)


class JudgeRuleFigures(FigureGroup):
    """How often the visible_pass rule (``judge_rule``) replaced the judge's answer."""

    rule_override: bool | None = Field(
        default=None,
        description="Under judge_rule visible_pass: whether the judge's answer failed a visible "
        "example while a final solution passed them all, so that solution became the answer "
        "(None: no rule).",
    )

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """``rule_overrides``: answers the rule replaced (only where the rule ran)."""
        ruled = [r for r in rows if r.figures.rule_override is not None]
        return {"rule_overrides": sum(bool(r.figures.rule_override) for r in ruled)} if ruled else {}

    @classmethod
    def summarise_table(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """The same count pooled over seeds, and how many of the replaced answers pass."""
        ruled = [r for r in rows if r.figures.rule_override is not None]
        if not ruled:
            return {}
        overridden = [r for r in ruled if r.figures.rule_override]
        return {"rule_overrides": len(overridden),
                "rule_overrides_passed": sum(r.passed for r in overridden)}


class DebateOutcome(Outcome, ConsensusFigures, JudgeRuleFigures):
    """Figures of ``debate``."""

    consensus: bool = Field(description="Whether a majority of debaters' final solutions behave alike.")
    final_in_majority: bool = Field(description="Whether the answer behaves like that majority.")
    agreement: list[float] = Field(
        description="Per round (proposals first), the share of debaters in the largest group behaving "
        "alike on the visible examples."
    )
    judge_decision: str = Field(
        description="How the judge decided (chosen, merged, fallback …; none without a verdict)."
    )
    messages: int = Field(description="Messages on the problem's thread.")
    unparsed_steps: int = Field(description="Role calls whose reply could not be parsed.")
