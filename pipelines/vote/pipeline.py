"""vote: k independent samples, the answer chosen by agreement on the visible examples.

The equal-compute baseline for debate (CodeT-style): run every sample on the prompt's visible
example inputs, group samples that behave identically, answer with the largest group. With
``token_budget`` it keeps sampling until that many tokens are spent (up to ``max_samples``),
so its cost can match another pipeline's measured tokens per problem.

With ``tests: generated`` (or ``both``) a test writer first writes ``n_tests`` asserts from the
prompt alone, and the answer is chosen by CodeT's dual execution agreement over the samples ×
tests pass matrix (:mod:`critiquelab.pipelines.vote.generated_tests`); the test writer's tokens count toward
the token budget. ``tests: visible`` (the default) is vote as it always was, unless
``select: visible_filter`` keeps only the samples that return every visible example's expected
value before grouping (AlphaCode's filter, then clustering) or ``greedy_first`` answers with the
greedy answer when it passes the visible examples and samples only when it does not.
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import Field, model_validator

from critiquelab.eval.behaviour import filtered_largest_group, largest_group, visible_verdicts
from critiquelab.pipelines.budget import TokenBudgetParams, require_resolved
from critiquelab.pipelines.params import GeneratedTestCount, ParallelAgents, SamplingTemperature
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.sampling import SamplerAgent
from critiquelab.pipelines.threads import converse
from critiquelab.pipelines.vote.generated_tests import DualAgreementVoterAgent, TestSource, TestWriterAgent
from critiquelab.pipelines.vote.outcome import VoteOutcome
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.test_writer import TestWriter

Selection = Literal["agreement", "visible_filter"]


class VoterAgent(Agent):
    """Groups the samples by behaviour on the visible examples and answers with the largest group
    (``select: visible_filter``: the largest among those returning every visible example's
    expected value); a greedy answer that passed the visible examples is the answer outright."""

    role = "voter"

    def __init__(self, ctx: TaskContext, select: Selection = "agreement") -> None:
        super().__init__(ctx)
        self.select = select
        self.samples: list[Message] = []
        self.greedy: Message | None = None
        self.listen([Intent.PROPOSAL, Intent.STATUS])

    def handle(self, message: Message) -> None:
        if message.intent == Intent.PROPOSAL:
            if message.metadata.get("greedy"):
                self.greedy = message
            else:
                self.samples.append(message)
            return
        # In sample order (the seed's order), so ties between groups break the same way always.
        codes = [m.content for m in sorted(self.samples, key=lambda m: int(m.metadata["sample"]))]
        verdicts = visible_verdicts(self.ctx.prompt, self.ctx.entry_point, codes)
        fingerprints = [fingerprint for fingerprint, _ in verdicts]
        if self.select == "visible_filter":
            group = filtered_largest_group(fingerprints, [passed for _, passed in verdicts])
        else:
            group = largest_group(fingerprints)
        passing = sum(passed for _, passed in verdicts)
        if self.greedy is not None and (self.greedy.metadata["visible_passed"] or not codes):
            content, chosen, summary = self.greedy.content, -1, "the greedy answer"
        else:
            content, chosen = (codes[group[0]], group[0]) if codes else ("", 0)
            summary = f"largest group: {len(group)} of {len(codes)} samples"
        self.ctx.publish(
            intent=Intent.VERDICT, sender=self.name, content=content, summary=summary, chosen=chosen,
            largest_group=len(group), samples=len(codes), visible_passing=passing,
        )


class VoteParams(TokenBudgetParams):
    """Parameters of ``vote``."""

    k: int = Field(default=5, ge=1, description="Samples to draw when there is no token budget "
                   "(with one, vote samples until it is spent, at least one sample, up to max_samples).")
    temperature: SamplingTemperature = Field(default=0.8, description="Sampling temperature of each sample.")
    max_samples: int = Field(default=20, ge=1, description="Most samples drawn under a token budget.")
    tests: TestSource = Field(
        default="visible",
        description="What selects the answer: visible (the largest group of samples behaving alike "
        "on the prompt's examples), generated (a test writer's asserts from the prompt alone; CodeT's "
        "dual agreement: consensus sets scored by samples agreeing x tests passed) or both (generated "
        "tests plus the visible examples as tests).",
    )
    n_tests: GeneratedTestCount = Field(
        default=10,
        description="Asserts the test writer is asked for (tests: generated or both; usable ones are "
        "'assert f(args) == literal' lines).",
    )
    select: Selection = Field(
        default="agreement",
        description="With tests: visible, how the answer is chosen: agreement (the largest group of "
        "samples behaving alike on the visible inputs) or visible_filter (the largest such group among "
        "the samples returning every visible example's expected value, AlphaCode-style; none: agreement).",
    )
    greedy_first: bool = Field(
        default=False,
        description="With tests: visible, first draw the greedy answer (the baseline's request); when it "
        "passes every visible example it is the answer and no sample is drawn, else its tokens count "
        "toward the budget and the samples decide.",
    )
    parallel_agents: ParallelAgents = Field(
        default=4,
        description="Samples drawn at once (1: one after another). Requests and cached answers do not "
        "depend on this: sample i has seed i, and under a token budget the same samples are drawn as "
        "one at a time. Helps with an endpoint that serves requests in parallel (llama-server does).",
    )

    @model_validator(mode="after")
    def _visible_only(self) -> VoteParams:
        if self.tests != "visible" and (self.select != "agreement" or self.greedy_first):
            raise ValueError("select and greedy_first apply to tests: visible")
        return self


@register_pipeline("vote", params=VoteParams, outcome=VoteOutcome, roles=("coder", "test_writer"))
class Vote(dspy.Module):
    """k independent samples (or as many as a token budget buys); the answer is the largest group
    of samples that behave identically on the prompt's visible examples (CodeT-style).

    Parameters: :class:`VoteParams` (``Vote(VoteParams(k=5))``); ``token_budget_from`` is the
    experiment runner's to resolve into ``token_budget``.
    """

    def __init__(self, params: VoteParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else VoteParams.defaults()
        require_resolved("vote", self.params)
        self.coder = dspy.Predict(Coder)
        self.test_writer = dspy.Predict(TestWriter) if self.params.tests != "visible" else None

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        sampler = SamplerAgent(
            ctx, self.coder, k=self.params.k, temperature=self.params.temperature,
            token_budget=self.params.token_budget, max_samples=self.params.max_samples,
            parallel=self.params.parallel_agents, after_tests=self.test_writer is not None,
            greedy_first=self.params.greedy_first,
        )
        if self.test_writer is None:
            history = converse(ctx, [sampler, VoterAgent(ctx, self.params.select)], sampler.name)
        else:
            writer = TestWriterAgent(ctx, self.test_writer, n_tests=self.params.n_tests)
            voter = DualAgreementVoterAgent(ctx, tests=self.params.tests)
            history = converse(ctx, [writer, sampler, voter], writer.name)
        verdict = next(m for m in reversed(history) if m.intent == Intent.VERDICT)
        samples = [m.content for m in history if m.intent == Intent.PROPOSAL and not m.metadata.get("greedy")]
        outcome = VoteOutcome(
            thread_id=ctx.thread_id, samples=len(samples), largest_group=verdict.metadata["largest_group"],
            messages=len(history), codes_to_score={"samples_passed": samples},
        )
        if self.params.greedy_first:
            outcome.greedy_answer = float(verdict.metadata["chosen"] == -1)
        if self.params.select == "visible_filter":
            outcome.visible_passing_samples = verdict.metadata["visible_passing"]
        if self.test_writer is None:
            return dspy.Prediction(code=verdict.content, outcome=outcome)
        written = next(m for m in history if m.intent == Intent.GENERATED_TESTS)
        for key in ("tests", "consensus_score", "selection"):
            setattr(outcome, key, verdict.metadata[key])
        outcome.parsed = written.metadata["trace"]["parsed"]
        # Scored against the reference solution by the runner, after the run (their accuracy).
        outcome.generated_test_code = written.content
        return dspy.Prediction(code=verdict.content, outcome=outcome)
