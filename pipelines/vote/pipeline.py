"""vote: k independent samples, the answer chosen by agreement on the visible examples.

The equal-compute baseline for debate (CodeT-style): run every sample on the prompt's visible
example inputs, group samples that behave identically, answer with the largest group. With
``token_budget`` it keeps sampling until that many tokens are spent (up to ``max_samples``),
so its cost can match another pipeline's measured tokens per problem.

With ``tests: generated`` (or ``both``) a test writer first writes ``n_tests`` asserts from the
prompt alone, and the answer is chosen by CodeT's dual execution agreement over the samples ×
tests pass matrix (:mod:`pipelines.vote.generated_tests`); the test writer's tokens count toward the
token budget. ``tests: visible`` (the default) is vote as it always was, unless
``select: visible_filter`` keeps only the samples that return every visible example's expected
value before grouping (AlphaCode's filter, then clustering) or ``greedy_first`` answers with the
greedy answer when it passes the visible examples and samples only when it does not.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Literal

import dspy
from pydantic import Field, model_validator

from core.errors import ServiceError
from eval.behaviour import filtered_largest_group, largest_group, visible_verdicts
from pipelines.agents import Agent, TaskContext, sampling_config
from pipelines.budget import TokenBudgetParams, require_resolved
from pipelines.parallel_agents import ParallelCalls
from pipelines.params import GeneratedTestCount, ParallelAgents, SamplingTemperature
from pipelines.pool.context import current_pool
from pipelines.pool.messages import Intent, Message
from pipelines.registry import register_pipeline
from pipelines.role_call import RoleResult, call_role
from pipelines.threads import converse
from pipelines.vote.generated_tests import DualAgreementVoterAgent, TestSource, TestWriterAgent
from pipelines.vote.outcome import VoteOutcome
from signatures.coder import Coder
from signatures.test_writer import TestWriter


def _tokens(step: RoleResult) -> int:
    return int(step.usage.get("prompt_tokens", 0) + step.usage.get("completion_tokens", 0))


class SamplerAgent(Agent):
    """Draws independent samples for the task, then tells the voter it is done.

    Up to ``parallel`` samples are drawn at once. Sample ``i`` always has seed and rollout id
    ``i`` and is published after samples ``0 … i-1``, so what is drawn and in which order it
    appears never depends on which call finished first. Under a token budget a sample is drawn
    when the samples before it cost less than the budget, exactly as one at a time; a sample
    starts before those are all back only when even their most expensive outcome (the first
    sample's prompt, which every sample repeats, plus ``max_tokens``) leaves it within budget.
    """

    role = "sampler"

    def __init__(
        self, ctx: TaskContext, coder: dspy.Module, *, k: int, temperature: float,
        token_budget: float | None, max_samples: int, parallel: int, after_tests: bool = False,
        greedy_first: bool = False,
    ) -> None:
        super().__init__(ctx)
        self.coder, self.k, self.temperature = coder, k, temperature
        self.greedy_first = greedy_first
        self.token_budget, self.max_samples = token_budget, max_samples
        self.parallel = parallel
        self.spent_before = 0  # tokens the test writer or the greedy answer spent of the budget
        if after_tests:  # the test writer answers the assignment; sampling starts after it
            self.listen([Intent.GENERATED_TESTS])
        else:
            self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def _draw(self, index: int) -> RoleResult:
        return call_role(
            self.coder, "coder", config=sampling_config(index, self.temperature), prompt=self.ctx.prompt
        )

    def _may_start(self, index: int, done: dict[int, RoleResult], bound: int | None) -> bool:
        """Would drawing one at a time draw sample ``index``? Unfinished earlier samples count
        at ``bound`` tokens each; with no bound, wait for them."""
        if self.token_budget is None:
            return index < self.k
        if index >= self.max_samples:
            return False
        spent = self.spent_before
        for earlier in range(index):
            if earlier in done:
                spent += _tokens(done[earlier])
            elif bound is None:
                return False
            else:
                spent += bound
        return index == 0 or spent < self.token_budget

    def _bound(self, first: RoleResult) -> int | None:
        """Most tokens a sample can cost, from the first one: every sample sends the same prompt
        in one call and gets at most ``max_tokens`` back. None when drawing one at a time."""
        if self.parallel == 1 or self.token_budget is None or first.usage.get("calls") != 1:
            return None
        lm = dspy.settings.lm
        max_tokens = lm.kwargs.get("max_tokens") if lm is not None else None
        return int(first.usage["prompt_tokens"]) + max_tokens if isinstance(max_tokens, int) else None

    def _greedy_passes(self, assignment: Message) -> bool:
        """Draw the greedy answer (the baseline's very request) and publish it; whether it passes
        every visible example, in which case no sample is needed."""
        step = call_role(self.coder, "coder", prompt=self.ctx.prompt)
        code = step.get("code") or step.raw
        [(_, passed)] = visible_verdicts(self.ctx.prompt, self.ctx.entry_point, [code])  # the voter's rule
        self.ctx.publish(
            intent=Intent.PROPOSAL, sender=self.name, content=code, summary="greedy answer",
            in_reply_to=assignment.id, step=step, greedy=True, visible_passed=passed,
        )
        self.spent_before += _tokens(step)
        return passed

    def handle(self, message: Message) -> None:
        if message.intent == Intent.GENERATED_TESTS:
            usage = message.metadata["trace"]["usage"]
            self.spent_before = int(usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        if self.greedy_first and self._greedy_passes(message):
            self.ctx.publish(intent=Intent.STATUS, sender=self.name, summary="the greedy answer passes "
                             "the visible examples: no sample drawn", samples=0)
            return
        done: dict[int, RoleResult] = {}
        running: dict[Future[RoleResult], int] = {}
        started = published = 0
        bound: int | None = None
        with ParallelCalls(self.parallel) as calls:
            while True:
                while len(running) < self.parallel and self._may_start(started, done, bound):
                    running[calls.submit(self._draw, started)] = started
                    started += 1
                if not running:
                    break
                for future in calls.finished(running):
                    index = running.pop(future)
                    done[index] = future.result()
                    if index == 0:
                        bound = self._bound(done[0])
                    if bound is not None and _tokens(done[index]) > bound:
                        # Samples drawn ahead might then be ones a sequential run would not draw.
                        raise ServiceError(
                            f"vote sample {index + 1} cost {_tokens(done[index])} tokens, more than the "
                            f"prompt plus max_tokens ({bound}) that drawing ahead under a token budget "
                            "relies on (the endpoint answered past max_tokens); set vote's "
                            "parallel_agents: 1"
                        )
                while published in done:  # in sample order, whichever call finished first
                    self._publish(message, published, done[published])
                    published += 1
        self.ctx.publish(intent=Intent.STATUS, sender=self.name, summary=f"{published} samples drawn",
                         samples=published)

    def _publish(self, assignment: Message, index: int, step: RoleResult) -> None:
        self.ctx.publish(
            intent=Intent.PROPOSAL, sender=self.name, content=step.get("code") or step.raw,
            summary=f"sample {index + 1}", in_reply_to=assignment.id, step=step, sample=index,
        )


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


@register_pipeline("vote", params=VoteParams, outcome=VoteOutcome, roles=("coder",))
class Vote(dspy.Module):
    """k independent samples (or as many as a token budget buys); the answer is the largest group
    of samples that behave identically on the prompt's visible examples (CodeT-style).

    Parameters: :class:`VoteParams`, as keywords (``Vote(k=5)``); ``token_budget_from`` is the
    experiment runner's to resolve into ``token_budget``.
    """

    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.params = VoteParams.validated("vote", params)
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
