"""Independent samples of the coder's answer, shared by the pipelines that select among samples
(``vote``, ``distinguish``): sample ``i`` is always the same request (seed and rollout id ``i`` at
the sampling temperature), so one pipeline's samples are the LM cache's answers for another's."""

from __future__ import annotations

from concurrent.futures import Future

import dspy

from critiquelab.core.errors import ServiceError
from critiquelab.eval.behaviour import visible_verdicts
from critiquelab.runtime.agents import Agent, TaskContext, sampling_config
from critiquelab.runtime.parallel_agents import ParallelCalls
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult, call_role


class SamplerAgent(Agent):
    """Draws independent samples for the task (with ``greedy_first``, the greedy answer first),
    then tells the agent that selects among them that it is done.

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
        greedy_first: bool = False, samples_after_passing_greedy: int = 0,
    ) -> None:
        super().__init__(ctx)
        self.coder, self.k, self.temperature = coder, k, temperature
        self.greedy_first = greedy_first
        # Without a token budget: samples drawn although the greedy answer passes the visible
        # examples, to check it against (0: it is the answer unchecked and nothing is drawn).
        self.samples_after_passing_greedy = samples_after_passing_greedy
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

    def _may_start(self, index: int, done: dict[int, RoleResult], bound: int | None, wanted: int) -> bool:
        """Would drawing one at a time draw sample ``index`` (of ``wanted`` without a budget)?
        Unfinished earlier samples count at ``bound`` tokens each; with no bound, wait for them."""
        if self.token_budget is None:
            return index < wanted
        if index >= self.max_samples:
            return False
        spent = self.spent_before
        for earlier in range(index):
            if earlier in done:
                spent += done[earlier].total_tokens
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
        code = step.code or step.raw
        [(_, passed)] = visible_verdicts(self.ctx.prompt, self.ctx.entry_point, [code])  # the voter's rule
        self.ctx.publish(
            intent=Intent.PROPOSAL, sender=self.name, content=code, summary="greedy answer",
            in_reply_to=assignment.id, step=step, greedy=True, visible_passed=passed,
        )
        self.spent_before += step.total_tokens
        return passed

    def handle(self, message: Message) -> None:
        if message.intent == Intent.GENERATED_TESTS:
            usage = message.metadata["trace"]["usage"]
            self.spent_before = int(usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        wanted = self.k
        if self.greedy_first and self._greedy_passes(message):
            if not self.samples_after_passing_greedy:
                self.ctx.publish(intent=Intent.STATUS, sender=self.name, summary="the greedy answer passes "
                                 "the visible examples: no sample drawn", samples=0)
                return
            wanted = self.samples_after_passing_greedy
        done: dict[int, RoleResult] = {}
        running: dict[Future[RoleResult], int] = {}
        started = published = 0
        bound: int | None = None
        with ParallelCalls(self.parallel) as calls:
            while True:
                while len(running) < self.parallel and self._may_start(started, done, bound, wanted):
                    running[calls.submit(self._draw, started)] = started
                    started += 1
                if not running:
                    break
                for future in calls.finished(running):
                    index = running.pop(future)
                    done[index] = future.result()
                    if index == 0:
                        bound = self._bound(done[0])
                    if bound is not None and done[index].total_tokens > bound:
                        # Samples drawn ahead might then be ones a sequential run would not draw.
                        raise ServiceError(
                            f"sample {index + 1} cost {done[index].total_tokens} tokens, more than the "
                            f"prompt plus max_tokens ({bound}) that drawing ahead under a token budget "
                            "relies on (the endpoint answered past max_tokens); set the "
                            "pipeline's parallel_agents: 1"
                        )
                while published in done:  # in sample order, whichever call finished first
                    self._publish(message, published, done[published])
                    published += 1
        self.ctx.publish(intent=Intent.STATUS, sender=self.name, summary=f"{published} samples drawn",
                         samples=published)

    def _publish(self, assignment: Message, index: int, step: RoleResult) -> None:
        self.ctx.publish(
            intent=Intent.PROPOSAL, sender=self.name, content=step.code or step.raw,
            summary=f"sample {index + 1}", in_reply_to=assignment.id, step=step, sample=index,
        )
