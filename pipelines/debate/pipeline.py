"""debate: N debaters × R rounds through the pool, a judge decides; consensus is measured.

Debaters draw independent initial proposals (sampling), then each round read their
neighbours' solutions and arguments (topology full / ring / star) and publish an argument
with a revised solution; the judge reads the final solutions and the transcript and picks or
merges the answer. Agreement is measured by behaviour on the prompt's visible examples.
"""

from __future__ import annotations

import dspy
from pydantic import Field

from critiquelab.eval.behaviour import behaviour_signatures, largest_group
from critiquelab.pipelines.debate.agents import DebaterAgent, JudgeAgent, Topology
from critiquelab.pipelines.debate.grounding import Grounding, JudgeRule
from critiquelab.pipelines.debate.outcome import DebateOutcome
from critiquelab.pipelines.params import FeedbackTimeout, ParallelAgents, PipelineParams, SamplingTemperature
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.threads import converse
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.debater import Debater, grounded_debater
from critiquelab.signatures.judge import Judge, grounded_judge


def debate_outcome(
    prompt: str, entry_point: str, history: list[Message], count: int, rounds: int, thread_id: str
) -> tuple[str, DebateOutcome]:
    """Final code and the outcome of one debate: its consensus figures, and each debater's first
    and final solution to be scored."""
    by_round = [[""] * count for _ in range(rounds + 1)]
    for message in history:
        if message.intent in (Intent.PROPOSAL, Intent.ARGUMENT):
            by_round[int(message.metadata["round"])][int(message.metadata["debater"])] = message.content
    verdicts = [m for m in history if m.intent == Intent.VERDICT]
    final = verdicts[-1].content if verdicts else by_round[-1][0]
    fingerprints = [behaviour_signatures(prompt, entry_point, codes) for codes in by_round]
    majority = largest_group(fingerprints[-1])
    consensus = len(majority) * 2 > count
    final_print = behaviour_signatures(prompt, entry_point, [final])[0]
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    unparsed = sum(1 for t in traces if not t.get("parsed", True))
    return final, DebateOutcome(
        iterations=max(1, rounds), parsed=unparsed == 0, thread_id=thread_id,
        # Scored on the hidden tests by the runner (never shown to a model): flips and
        # consensus correctness need each debater's first and final solution judged.
        codes_to_score={"debaters_first_passed": by_round[0], "debaters_final_passed": by_round[-1]},
        agreement=[len(largest_group(f)) / count for f in fingerprints],
        consensus=consensus,
        final_in_majority=consensus and final_print == fingerprints[-1][majority[0]],
        judge_decision=verdicts[-1].metadata.get("decision", "") if verdicts else "none",
        # Only where the rule ran (its message says which solution replaced the judge's answer).
        rule_override=(verdicts[-1].metadata["rule_override"] is not None
                       if verdicts and "rule_override" in verdicts[-1].metadata else None),
        messages=len(history),
        unparsed_steps=unparsed,
    )


class DebateParams(PipelineParams):
    """Parameters of ``debate``."""

    debaters: int = Field(default=3, ge=2, description="Agents that propose a solution and argue.")
    rounds: int = Field(
        default=2, ge=0,
        description="Rounds of argument after the initial proposals (0: the judge decides on the proposals).",
    )
    topology: Topology = Field(
        default="full",
        description="Whose solutions a debater reads: everyone (full), its two neighbours (ring), or "
        "the hub (star: debater 0 reads everyone, the others read debater 0).",
    )
    temperature: SamplingTemperature = Field(
        default=0.7,
        description="Sampling temperature of the debaters' proposals and arguments.",
    )
    execution_feedback: bool = Field(
        default=False,
        description="Grounded debate: run each proposal and revision on the examples visible in the "
        "prompt (never the hidden tests); debaters and the judge read each solution's results "
        "beside its code (which examples pass, what a failing call returned or raised).",
    )
    judge_rule: JudgeRule = Field(
        default="none",
        description="visible_pass: an answer (the judge's choice or merge) that fails a visible "
        "example is replaced by the lowest-numbered final solution passing them all, where one "
        "does (counted: rule_override); none: the judge's answer stands.",
    )
    feedback_timeout_s: FeedbackTimeout
    parallel_agents: ParallelAgents = Field(
        default=3,
        description="Debaters' model calls in flight at once (1: one after another). The proposals, "
        "and each round's arguments, are independent; requests and cached answers do not depend on "
        "this, as every request is built in debater order. Helps with an endpoint that serves "
        "requests in parallel (llama-server does).",
    )


@register_pipeline("debate", params=DebateParams, outcome=DebateOutcome,
                   roles={"coder": "proposer", "debater": "debater", "judge": "judge"})
class Debate(dspy.Module):
    """N debaters propose (sampling) and argue for R rounds with the neighbours their topology
    shows them; a judge picks or merges the answer.

    Parameters: :class:`DebateParams` (``Debate(DebateParams(debaters=2, rounds=1))``).
    """

    def __init__(self, params: DebateParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else DebateParams.defaults()
        self.proposer = dspy.Predict(Coder)
        grounded = self.params.execution_feedback
        # Grounded roles read each solution's results; every other run's prompts stay as they were.
        self.debater = dspy.Predict(grounded_debater() if grounded else Debater)
        self.judge = dspy.Predict(grounded_judge() if grounded else Judge)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        params = self.params
        count, rounds = params.debaters, params.rounds
        grounded, rule = params.execution_feedback, params.judge_rule == "visible_pass"
        # The rule reads the visible examples' results even where no role is shown them.
        grounding = Grounding(prompt, entry_point, params.feedback_timeout_s) if grounded or rule else None
        agents: list[Agent] = [
            DebaterAgent(
                ctx, i, count, rounds=rounds, topology=params.topology, proposer=self.proposer,
                debater=self.debater, temperature=params.temperature,
                grounding=grounding if grounded else None,
            )
            for i in range(count)
        ]
        agents.append(JudgeAgent(ctx, self.judge, count=count, rounds=rounds, grounding=grounding,
                                 show_results=grounded, rule=rule))
        # Broadcast: every debater starts.
        history = converse(ctx, agents, None, parallel=self.params.parallel_agents)
        final, outcome = debate_outcome(prompt, entry_point, history, count, rounds, ctx.thread_id)
        return dspy.Prediction(code=final, outcome=outcome)
