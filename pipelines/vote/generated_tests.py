"""Agents around model-written tests: the test writer, and the voter that picks a sample by
CodeT's dual execution agreement (samples × tests pass matrix) instead of behaviour alone."""

from __future__ import annotations

from typing import Literal, get_args

import dspy

from critiquelab.eval.behaviour import behaviour_signatures, largest_group
from critiquelab.eval.generated_tests import consensus_sets, parse_asserts, pass_matrix, render_tests
from critiquelab.eval.visible_examples import visible_examples
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role

TestSource = Literal["visible", "generated", "both"]
TEST_SOURCES: tuple[str, ...] = get_args(TestSource)


class TestWriterAgent(Agent):
    """Writes ``n_tests`` assert lines from the prompt alone and publishes the usable ones
    (``assert f(args) == literal``) as a ``generated_tests`` message to everyone."""

    __test__ = False  # an agent, not a pytest test class
    role = "test_writer"

    def __init__(self, ctx: TaskContext, writer: dspy.Module, *, n_tests: int) -> None:
        super().__init__(ctx)
        self.writer, self.n_tests = writer, n_tests
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def handle(self, message: Message) -> None:
        # The prompt only: hidden tests and the reference solution never reach this role.
        step = call_role(self.writer, self.role, prompt=self.ctx.prompt, n_tests=self.n_tests)
        written = step.test_code or step.raw
        tests = parse_asserts(written, self.ctx.entry_point, limit=self.n_tests)
        self.ctx.publish(
            intent=Intent.GENERATED_TESTS, sender=self.name, content=render_tests(tests),
            summary=f"{len(tests)} usable tests written", in_reply_to=message.id, step=step,
            tests=len(tests),
        )


class DualAgreementVoterAgent(Agent):
    """Runs every sample on the tests (visible examples, generated tests or both) and answers
    with the first sample of the best consensus set — (samples agreeing) × (tests passed).
    When no set passes any test (or there are no tests) it falls back to vote's behaviour
    grouping on the visible examples, and says so in the verdict (``selection``)."""

    role = "voter"

    def __init__(self, ctx: TaskContext, *, tests: TestSource, timeout_s: float = 5.0) -> None:
        super().__init__(ctx)
        self.source, self.timeout_s = tests, timeout_s
        self.samples: list[Message] = []
        self.generated = ""
        self.listen([Intent.PROPOSAL, Intent.STATUS, Intent.GENERATED_TESTS])

    def handle(self, message: Message) -> None:
        if message.intent == Intent.PROPOSAL:
            self.samples.append(message)
            return
        if message.intent == Intent.GENERATED_TESTS:
            self.generated = message.content
            return
        codes = [m.content for m in sorted(self.samples, key=lambda m: int(m.metadata["sample"]))]
        entry_point = self.ctx.entry_point
        shown = visible_examples(self.ctx.prompt, entry_point) if self.source == "both" else []
        # A written test that repeats a visible example is one test, not two votes for it.
        written = parse_asserts(self.generated, entry_point)
        tests = list({(t.args, t.expected): t for t in shown + written}.values())
        matrix = pass_matrix(self.ctx.prompt, entry_point, codes, tests, timeout_s=self.timeout_s)
        ranked = consensus_sets(matrix)
        if ranked and ranked[0].score > 0:
            group, score, selection = ranked[0].samples, ranked[0].score, "dual_agreement"
        else:
            group = largest_group(behaviour_signatures(self.ctx.prompt, entry_point, codes))
            score, selection = 0, "behaviour"
        chosen = group[0] if group else 0
        self.ctx.publish(
            intent=Intent.VERDICT, sender=self.name, content=codes[chosen] if codes else "",
            summary=f"{selection}: {len(group)} of {len(codes)} samples, score {score} on {len(tests)} tests",
            chosen=chosen, largest_group=len(group), samples=len(codes), tests=len(tests),
            consensus_score=score, selection=selection,
            matrix=[[int(passed) for passed in row] for row in matrix],
        )
