"""distinguish: selection that does not trust weak examples (S*, arXiv 2502.14382; CodeT,
arXiv 2207.10397).

The greedy answer (the baseline's very request) and samples (vote's very requests: sample ``i``
with seed and rollout id ``i`` at ``temperature``) are the candidates: ``check_samples`` of them
when the greedy answer passes the prompt's visible examples — it is checked, not trusted —
``k`` when it fails them. The candidates passing the visible examples (all that compile if none
does) run in the sandbox on the visible inputs and on inputs an input writer wrote from the
prompt alone (calls with literal arguments, no expected values), and are grouped by what they
do. One group is the answer; several are settled by ``selection``: ``pairwise`` — S*'s adaptive
pairwise selection, a judge shown one input on which two groups differ and both outputs picks
one, the winner meeting the next group (the greedy answer's group first, then by size) —
``agreement`` — CodeT's dual agreement, the generated inputs labelled with the candidates'
majority output — or ``both`` — the greedy answer's group is replaced only when the judge and
agreement pick the same other group. The answer is the greedy answer when it is in the winning
group, else the group's first sample. With no usable generated input the answer is vote's
greedy-first visible filter's (``check_samples: 0`` and a passing greedy answer: that answer,
one call). Hidden tests never reach a prompt; every candidate is scored on them after the run.
"""

from __future__ import annotations

import dspy
from pydantic import Field

from critiquelab.pipelines.distinguish.agents import InputWriterAgent, PairwiseJudgeAgent, SelectorAgent
from critiquelab.pipelines.distinguish.outcome import DistinguishOutcome
from critiquelab.pipelines.distinguish.selection import GREEDY, InputSource, Selection
from critiquelab.pipelines.params import FeedbackTimeout, ParallelAgents, PipelineParams, SamplingTemperature
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.sampling import SamplerAgent
from critiquelab.pipelines.threads import converse
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.input_writer import InputWriter
from critiquelab.signatures.pairwise_judge import PairwiseJudge


class DistinguishParams(PipelineParams):
    """Parameters of ``distinguish``."""

    check_samples: int = Field(
        default=4, ge=0, le=50,
        description="Samples drawn when the greedy answer passes the visible examples, to check it "
        "against (0: it is the answer unchecked, as vote's greedy_first).",
    )
    k: int = Field(default=10, ge=1, le=50, description="Samples drawn when the greedy answer fails the "
                   "visible examples.")
    temperature: SamplingTemperature = Field(
        default=0.8,
        description="Sampling temperature of each sample (vote's samples at the same temperature are the "
        "same requests).",
    )
    n_inputs: int = Field(
        default=10, ge=1, le=50,
        description="Inputs the input writer is asked for (usable ones are calls of the function with "
        "literal arguments its signature takes; the others are dropped and counted).",
    )
    input_source: InputSource = Field(
        default="writer",
        description="Where the inputs that tell candidates apart come from: writer (the input writer "
        "role, n_inputs calls from the prompt), mutation (n_inputs type-aware mutations of the visible "
        "examples' calls, EvalPlus-style: no model call) or both.",
    )
    selection: Selection = Field(
        default="pairwise",
        description="How groups that behave differently are settled: pairwise (a judge picks between "
        "two outputs on an input where they differ, the winner meets the next group), agreement "
        "(CodeT's dual agreement, generated inputs labelled with the majority output; no judge call) "
        "or both (the greedy answer's group is replaced only when the two pick the same other group).",
    )
    feedback_timeout_s: FeedbackTimeout = Field(
        description="Wall-clock limit in seconds for one call of a candidate on a visible or a generated "
        "input.",
    )
    parallel_agents: ParallelAgents = Field(
        default=4,
        description="Samples drawn at once (1: one after another); requests and answers do not depend on it.",
    )


def _outcome(history: list[Message], verdict: Message, samples: list[Message], greedy: Message,
             thread_id: str) -> DistinguishOutcome:
    """The per-problem figures, from the thread's messages alone; every candidate (0: the greedy
    answer) is scored on the hidden tests by the runner after the run, so selection accuracy and
    right or wrong replacements of the greedy answer can be counted."""
    written = next((m for m in history if m.intent == Intent.GENERATED_INPUTS), None)
    found = verdict.metadata
    passed_visible = bool(found["greedy_passed_visible"])
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    return DistinguishOutcome(
        parsed=all(t.get("parsed", True) for t in traces), thread_id=thread_id,
        codes_to_score={"candidates_passed": [greedy.content, *(m.content for m in samples)]},
        samples=len(samples),
        greedy_passed_visible=passed_visible,
        visible_passing=found["visible_passing"],
        inputs_written=written.metadata["written"] if written else 0,
        inputs_kept=written.metadata["kept"] if written else 0,
        inputs_dropped=written.metadata["dropped"] if written else 0,
        groups=found["group_count"],
        disagreements=found["disagreements"],
        judge_calls=sum(m.intent == Intent.JUDGEMENT for m in history),
        selection=found["selection"],
        chosen=found["chosen"],
        greedy_replaced=passed_visible and found["chosen"] != GREEDY,
        messages=len(history),
    )


@register_pipeline("distinguish", params=DistinguishParams, outcome=DistinguishOutcome,
                   roles=("coder", "input_writer", "pairwise_judge"))
class Distinguish(dspy.Module):
    """The greedy answer checked, not trusted: with samples (check_samples when it passes the visible
    examples, k when not), on inputs a writer made up to tell programs apart, settled by a pairwise
    judge (S*), CodeT-style agreement or both.

    Parameters: :class:`DistinguishParams` (``Distinguish(DistinguishParams(selection="agreement"))``).
    """

    def __init__(self, params: DistinguishParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else DistinguishParams.defaults()
        self.coder = dspy.Predict(Coder)
        self.input_writer = dspy.Predict(InputWriter)
        self.pairwise_judge = dspy.Predict(PairwiseJudge)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        params = self.params
        sampler = SamplerAgent(
            ctx, self.coder, k=params.k, temperature=params.temperature, token_budget=None,
            max_samples=params.k, parallel=params.parallel_agents, greedy_first=True,
            samples_after_passing_greedy=params.check_samples,
        )
        agents = [
            sampler,
            SelectorAgent(ctx, selection=params.selection, timeout_s=params.feedback_timeout_s),
            InputWriterAgent(ctx, self.input_writer, n_inputs=params.n_inputs, source=params.input_source),
            PairwiseJudgeAgent(ctx, self.pairwise_judge),
        ]
        history = converse(ctx, agents, sampler.name)
        verdict = next(m for m in reversed(history) if m.intent == Intent.VERDICT)
        proposals = [m for m in history if m.intent == Intent.PROPOSAL]
        greedy = next(m for m in proposals if m.metadata.get("greedy"))
        samples = sorted((m for m in proposals if not m.metadata.get("greedy")),
                         key=lambda m: int(m.metadata["sample"]))
        return dspy.Prediction(
            code=verdict.content, outcome=_outcome(history, verdict, samples, greedy, ctx.thread_id)
        )
