"""debate: N debaters × R rounds through the pool, a judge decides; consensus is measured.

Debaters draw independent initial proposals (sampling), then each round read their
neighbours' solutions and arguments (topology full / ring / star) and publish an argument
with a revised solution; the judge reads the final solutions and the transcript and picks or
merges the answer. Agreement is measured by behaviour on the prompt's visible examples.
"""

from __future__ import annotations

from typing import Any

import dspy

from eval.behaviour import behaviour_signatures, largest_group
from pipelines.agents import Agent, TaskContext
from pipelines.debate_agents import TOPOLOGIES, DebaterAgent, JudgeAgent
from pipelines.messages import Intent, Message
from pipelines.pool_context import current_pool
from pipelines.registry import register_pipeline
from pipelines.threads import converse
from signatures.coder import Coder
from signatures.debater import Debater
from signatures.judge import Judge


def debate_metrics(
    prompt: str, entry_point: str, history: list[Message], count: int, rounds: int
) -> tuple[str, list[list[str]], dict[str, Any]]:
    """Final code, each debater's code per round, and the consensus metrics of one debate."""
    by_round = [[""] * count for _ in range(rounds + 1)]
    for message in history:
        if message.intent in (Intent.PROPOSAL, Intent.ARGUMENT):
            by_round[int(message.metadata["round"])][int(message.metadata["debater"])] = message.content
    verdicts = [m for m in history if m.intent == Intent.VERDICT]
    final = verdicts[-1].content if verdicts else by_round[-1][0]
    fingerprints = [behaviour_signatures(prompt, entry_point, codes) for codes in by_round]
    agreement = [len(largest_group(f)) / count for f in fingerprints]
    majority = largest_group(fingerprints[-1])
    consensus = len(majority) * 2 > count
    final_print = behaviour_signatures(prompt, entry_point, [final])[0]
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    metrics = {
        "agreement": agreement,
        "consensus": consensus,
        "final_in_majority": consensus and final_print == fingerprints[-1][majority[0]],
        "judge_decision": verdicts[-1].metadata.get("decision", "") if verdicts else "none",
        "messages": len(history),
        "unparsed_steps": sum(1 for t in traces if not t.get("parsed", True)),
    }
    return final, by_round, metrics


@register_pipeline("debate")
class Debate(dspy.Module):
    """``debaters`` agents debate for ``rounds`` rounds; a judge picks or merges the answer."""

    def __init__(
        self, debaters: int = 3, rounds: int = 2, topology: str = "full", temperature: float = 0.7
    ) -> None:
        super().__init__()
        if debaters < 2 or rounds < 0:
            raise ValueError("a debate needs at least 2 debaters and 0 or more rounds")
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {TOPOLOGIES}")
        self.debaters, self.rounds, self.topology = debaters, rounds, topology
        self.temperature = temperature
        self.proposer = dspy.Predict(Coder)
        self.debater = dspy.Predict(Debater)
        self.judge = dspy.Predict(Judge)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        agents: list[Agent] = [
            DebaterAgent(
                ctx, i, self.debaters, rounds=self.rounds, topology=self.topology,
                proposer=self.proposer, debater=self.debater, temperature=self.temperature,
            )
            for i in range(self.debaters)
        ]
        agents.append(JudgeAgent(ctx, self.judge, count=self.debaters, rounds=self.rounds))
        history = converse(ctx, agents, None)  # broadcast: every debater starts
        final, by_round, metrics = debate_metrics(prompt, entry_point, history, self.debaters, self.rounds)
        return dspy.Prediction(
            code=final, iterations=self.rounds, parsed=metrics["unparsed_steps"] == 0,
            metrics=metrics, thread_id=ctx.thread_id,
            # Scored on the hidden tests by the runner (never shown to a model): flips and
            # consensus correctness need each debater's first and final solution judged.
            scored_codes={"debaters_first": by_round[0], "debaters_final": by_round[-1]},
        )
