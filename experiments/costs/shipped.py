"""The cost figures ``--estimate`` falls back on when this data directory has measured none: one
documented run of the bundled 0.5B model on HumanEval per pipeline, scaled where the params fix the
number of LM calls (debaters × rounds, vote samples). Params it does not cover give no figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, Field

from critiquelab.pipelines.critic_loop.pipeline import CriticLoopParams
from critiquelab.pipelines.debate.pipeline import DebateParams
from critiquelab.pipelines.params import PipelineParams
from critiquelab.pipelines.vote.pipeline import VoteParams


class PerProblem(BaseModel):
    """Mean cost of one problem."""

    lm_calls: float
    prompt_tokens: float
    completion_tokens: float
    seconds: float | None = Field(description="None: each measured problem replayed all calls from cache.")


@dataclass(frozen=True)
class ShippedCost:
    """One pipeline's mean cost per problem on the bundled 0.5B model (HumanEval, temperature 0,
    max_tokens 1024) in a documented run, and the LM calls per problem that given params make
    (None: that run does not cover them, so the estimate says unknown)."""

    lm_calls: float
    prompt_tokens: float
    completion_tokens: float
    # Wall time per problem by local server: llama-cpp-python's one problem and one request at a
    # time; llama-server's with the defaults' problems and agents in flight (so a run's wall time
    # is problems × seconds / concurrency).
    seconds: Mapping[str, float]
    measured_with: str
    calls_at: Callable[[PipelineParams, float | None], float | None]  # (params, token budget)

    def at(self, params: PipelineParams, budget: float | None, server: str) -> PerProblem | None:
        calls = self.calls_at(params, budget)
        if calls is None:
            return None
        share = calls / self.lm_calls  # tokens and time scale with the calls
        seconds = self.seconds.get(server)
        return PerProblem(
            lm_calls=calls, prompt_tokens=share * self.prompt_tokens,
            completion_tokens=share * self.completion_tokens,
            seconds=share * seconds if seconds is not None else None,
        )


def _vote_samples(params: PipelineParams, budget: float | None) -> float | None:
    """vote samples until the budget is spent (at least one, at most max_samples), else k. With
    generated tests a test writer's call comes first, which no shipped run measured; with
    greedy_first whether any sample is drawn depends on the greedy answer: not guessed either."""
    if not isinstance(params, VoteParams) or params.tests != "visible" or params.greedy_first:
        return None
    if budget is None:
        return float(params.k)
    return float(min(params.max_samples, max(1, math.ceil(budget / _VOTE_SAMPLE_TOKENS))))


def _critic_loop_calls(params: PipelineParams, budget: float | None) -> float | None:
    if not isinstance(params, CriticLoopParams):
        return None
    measured = params.max_iterations == 3 and params.execution_feedback and not params.meta_critic
    return 2.75 if measured and not params.critics else None  # a panel makes more calls per review


def _debate_calls(params: PipelineParams, budget: float | None) -> float | None:
    """Each debater proposes and argues each round, then the judge; other topologies: not measured."""
    if not isinstance(params, DebateParams) or params.topology != "full":
        return None
    return params.debaters * (params.rounds + 1) + 1.0


# The README's quick run (`critiquelab run experiments/debate_vs_critic.yaml --limit 20`, bundled
# 0.5B on a 2-core machine, one request at a time, 2026-11): per problem prompt / completion
# tokens 233.4 / 188.7 (baseline), 1,855.2 / 346.7 (critic loop with execution feedback),
# 10,749.1 / 6,644.6 (debate, 3 debaters × 2 rounds: 10 calls), 4,669 / 3,836.6 (vote at debate's
# budget: capped at 20 samples); wall time ~7 s, ~15 s, ~315 s (mean of 16), ~84 s (mean of 20).
# The critic loop's 2.75 calls: its 5.2 messages per problem less the task, 1.3 execution-feedback
# messages and 0.15 "max_iterations reached".
_README_RUN = "the README's 20-problem run (bundled 0.5B, HumanEval, 2-core machine)"
# Wall time with llama-server at the defaults (4 problems at once, debaters and 4 vote samples in
# parallel), from the README's first command on a fresh clone (`--limit 6`, 2026-11-23): each
# pipeline's wall time × 4 / 6 problems, so that problems × seconds / 4 gives it back — baseline
# 81 s (model start-up included), critic loop 68 s, debate 608 s, vote 262 s.
SERVED_RUN = "llama-server, 4 problems at once, the README's 6-problem run"
_VOTE_SAMPLE_TOKENS = (4669 + 3836.6) / 20


def _seconds(one_at_a_time: float, served_wall: float) -> dict[str, float]:
    return {"llama-cpp-python": one_at_a_time, "llama-server": served_wall * 4 / 6}


SHIPPED: Mapping[str, ShippedCost] = {
    "baseline": ShippedCost(1, 233.4, 188.7, _seconds(7.0, 81), _README_RUN, lambda params, budget: 1.0),
    "critic_loop": ShippedCost(
        2.75, 1855.2, 346.7, _seconds(15.0, 68), f"{_README_RUN}, max_iterations 3 with execution feedback",
        _critic_loop_calls,
    ),
    "debate": ShippedCost(
        10, 10749.1, 6644.6, _seconds(315.0, 608), f"{_README_RUN}, 3 debaters × 2 rounds, full topology",
        _debate_calls,
    ),
    "vote": ShippedCost(20, 4669.0, 3836.6, _seconds(84.0, 262), f"{_README_RUN}, 20 samples", _vote_samples),
}
