"""The agents of the SOP line: product manager → architect → engineer → QA engineer (→ an
optional reviewer), each handing its typed artifact to the next through the pool."""

from __future__ import annotations

import json
import re
from typing import ClassVar

import dspy
from pydantic import BaseModel

from critiquelab.eval.assembly import assemble_program
from critiquelab.eval.generated_tests import parse_asserts, render_tests
from critiquelab.eval.visible_examples import VisibleExample, execution_feedback, visible_examples
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.handoff import HandoffAgent, code_of
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult, call_role, fell_back
from critiquelab.signatures.engineer import CodeArtifact
from critiquelab.signatures.handoff import Handoff
from critiquelab.signatures.product_manager import Spec
from critiquelab.signatures.qa_engineer import QaReport
from critiquelab.signatures.review import Review, render_review
from critiquelab.signatures.sop_architect import Design

UNPARSED = "the reply could not be parsed into the stage's schema"


def _section(raw: str, field: str) -> str:
    """The part of an unparsed reply meant as ``field``: its ``[[ ## field ## ]]`` section or
    its key in a JSON reply, else the whole reply — so the receiver's validation error names
    what is wrong with the artifact rather than with the reply's format."""
    found = re.search(rf"\[\[ ## {field} ## \]\]\s*(.*?)\s*(?:\[\[ ## |\Z)", raw, re.DOTALL)
    if found:
        return found.group(1)
    try:
        reply = json.loads(raw)
    except ValueError:
        return raw
    return json.dumps(reply[field]) if isinstance(reply, dict) and field in reply else raw


def _artifact(step: RoleResult, field: str) -> tuple[str, list[str]]:
    """A role's typed output as the artifact JSON, or what its unparsed reply holds for it,
    with a blocker saying so."""
    value = step.output(field)
    if step.parsed and isinstance(value, BaseModel):
        return value.model_dump_json(), []
    return _section(step.raw, field), [UNPARSED]


def latest_artifact(ctx: TaskContext, stage: str) -> str:
    """The artifact last handed over at ``stage`` in this thread ('none' if there is none)."""
    handoffs = [m for m in ctx.history() if m.intent == Intent.HANDOFF and m.metadata.get("stage") == stage]
    return Handoff.model_validate_json(handoffs[-1].content).artifact if handoffs else "none"


class ProductManagerAgent(HandoffAgent):
    """Restates the task as a Spec (from the prompt alone) and hands it to the architect."""

    role = "product_manager"

    def __init__(self, ctx: TaskContext, pm: dspy.Module, *, max_retries: int) -> None:
        super().__init__(ctx, max_retries=max_retries)
        self.pm = pm
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def handle(self, message: Message) -> None:
        if message.intent == Intent.TASK_ASSIGNMENT:
            self._write("none", message.id)
        else:
            super().handle(message)

    def returned(self, stage: str, rejection: Message) -> None:
        self._write(rejection.content, rejection.id)

    def _write(self, rejection: str, in_reply_to: str) -> None:
        step = call_role(self.pm, self.role, prompt=self.ctx.prompt, rejection=rejection)
        artifact, blockers = _artifact(step, "spec")
        self.hand_off(
            self.ctx.agent_name("architect"), "spec", artifact=artifact, blockers=blockers,
            summary=f"spec of {self.ctx.entry_point}", next_action="design the interface and approach",
            in_reply_to=in_reply_to, step=step,
        )


class SopArchitectAgent(HandoffAgent):
    """Validates the Spec, designs the interface (a Design) and hands it to the engineer."""

    role = "architect"
    schemas: ClassVar[dict[str, type[BaseModel]]] = {"spec": Spec}

    def __init__(self, ctx: TaskContext, architect: dspy.Module, *, max_retries: int) -> None:
        super().__init__(ctx, max_retries=max_retries)
        self.architect = architect
        self.spec = "none"

    def accepted(
        self, stage: str, artifact: BaseModel | None, envelope: Handoff, message: Message
    ) -> None:
        self.spec = envelope.artifact
        self._design("none", message.id)

    def returned(self, stage: str, rejection: Message) -> None:
        self._design(rejection.content, rejection.id)

    def _design(self, rejection: str, in_reply_to: str) -> None:
        step = call_role(
            self.architect, self.role, prompt=self.ctx.prompt, spec=self.spec, rejection=rejection
        )
        artifact, blockers = _artifact(step, "design")
        self.hand_off(
            self.ctx.agent_name("engineer"), "design", artifact=artifact, blockers=blockers,
            summary=f"design of {self.ctx.entry_point}", next_action="implement the design",
            in_reply_to=in_reply_to, step=step,
        )


class EngineerAgent(HandoffAgent):
    """Implements the Design, then revises on each QA report or review, writing at most
    ``max_versions`` versions (a version QA returned unrun, e.g. one that does not compile,
    is rewritten without counting)."""

    role = "engineer"
    schemas: ClassVar[dict[str, type[BaseModel]]] = {
        "design": Design, "qa_report": QaReport, "review": Review,
    }

    def __init__(
        self, ctx: TaskContext, engineer: dspy.Module, *, max_retries: int, max_versions: int
    ) -> None:
        super().__init__(ctx, max_retries=max_retries)
        self.engineer, self.max_versions = engineer, max_versions
        self.versions = 0
        self.design, self.code = "none", ""

    def accepted(
        self, stage: str, artifact: BaseModel | None, envelope: Handoff, message: Message
    ) -> None:
        if stage == "design":
            self.design = envelope.artifact
            self._implement("none", message.id)
            return
        if self.versions >= self.max_versions:
            self.ctx.publish(
                intent=Intent.STATUS, sender=self.name, summary="max_iterations reached",
                in_reply_to=message.id, stop_reason="max_iterations",
            )
            return
        if isinstance(artifact, QaReport):
            feedback = "QA report: " + ("\n".join(artifact.failures) or "failed")
        elif isinstance(artifact, Review):
            feedback = "Review: " + render_review(artifact)
        else:
            feedback = envelope.artifact
        self._implement(feedback, message.id)

    def returned(self, stage: str, rejection: Message) -> None:
        self.versions -= 1  # the same version again, this time one QA can run
        self._implement(f"QA could not run your code: {rejection.content}", rejection.id)

    def _implement(self, feedback: str, in_reply_to: str) -> None:
        self.versions += 1
        step = call_role(
            self.engineer, self.role, prompt=self.ctx.prompt, spec=latest_artifact(self.ctx, "spec"),
            design=self.design, feedback=feedback,
        )
        self.code = step.implementation_code or step.raw
        artifact = CodeArtifact.model_construct(code=self.code).model_dump_json()
        self.hand_off(
            self.ctx.agent_name("qa_engineer"), "code", artifact=artifact,
            blockers=[] if step.parsed else [UNPARSED],
            summary=f"version {self.versions} of {self.ctx.entry_point}", next_action="test it",
            in_reply_to=in_reply_to, step=step, version=self.versions,
        )


class QaEngineerAgent(HandoffAgent):
    """Writes ``n_tests`` acceptance tests from the spec and the prompt (once, before seeing any
    code), runs each version on them and on the prompt's visible examples in the sandbox, and
    reports failures (call, got, expected) back to the engineer — or, when all pass, hands the
    version to the reviewer or ends the line."""

    role = "qa_engineer"
    schemas: ClassVar[dict[str, type[BaseModel]]] = {"code": CodeArtifact}

    def __init__(
        self, ctx: TaskContext, qa: dspy.Module, *, max_retries: int, n_tests: int, timeout_s: float,
        reviewer: bool,
    ) -> None:
        super().__init__(ctx, max_retries=max_retries)
        self.qa, self.n_tests, self.timeout_s, self.reviewer = qa, n_tests, timeout_s, reviewer
        self.tests: list[VisibleExample] | None = None
        self.checks["code"] = self._compiles

    def _compiles(self, artifact: BaseModel) -> str:
        program = assemble_program(self.ctx.prompt, getattr(artifact, "code", ""), self.ctx.entry_point)
        return "" if program.ok else f"the code does not compile: {program.syntax_error}"

    def _write_tests(self, in_reply_to: str) -> list[VisibleExample]:
        # The spec and the prompt only: never the code, the hidden tests or a reference solution.
        step = call_role(
            self.qa, self.role, prompt=self.ctx.prompt, spec=latest_artifact(self.ctx, "spec"),
            n_tests=self.n_tests,
        )
        written = step.acceptance_test_code or step.raw
        tests = parse_asserts(written, self.ctx.entry_point, self.n_tests)
        self.ctx.publish(
            intent=Intent.GENERATED_TESTS, sender=self.name, content=render_tests(tests),
            summary=f"{len(tests)} acceptance tests written", in_reply_to=in_reply_to, step=step,
            tests=len(tests),
        )
        return tests

    def _report(self, code: str) -> QaReport:
        shown = visible_examples(self.ctx.prompt, self.ctx.entry_point)
        tests = list({(t.args, t.expected): t for t in shown + (self.tests or [])}.values())
        program = assemble_program(self.ctx.prompt, code, self.ctx.entry_point)
        if not program.ok:
            failure = f"does not compile: {program.syntax_error}"
            return QaReport(passed=False, tests_run=0, failures=[failure])
        if not program.implements(self.ctx.entry_point):
            # Checked before any test: a stub must not pass because no test happens to call it
            # (or because none could be parsed from the QA engineer's reply).
            failure = (
                f"FAIL: {self.ctx.entry_point} is not implemented (missing, or its body is only a "
                "docstring, pass, ... or raise NotImplementedError)"
            )
            return QaReport(passed=False, tests_run=0, failures=[failure])
        if not tests:
            return QaReport(passed=True, tests_run=0)
        lines = execution_feedback(program.source, self.ctx.entry_point, tests, timeout_s=self.timeout_s)
        failures = [line for line in lines.splitlines() if line.startswith("FAIL")]
        return QaReport(passed=not failures, tests_run=len(tests), failures=failures)

    def accepted(
        self, stage: str, artifact: BaseModel | None, envelope: Handoff, message: Message
    ) -> None:
        code = artifact.code if isinstance(artifact, CodeArtifact) else code_of(envelope)
        if self.tests is None:
            self.tests = self._write_tests(message.id)
        report = self._report(code)
        outcome = "passed" if report.passed else "failed"
        record = self.ctx.publish(
            intent=Intent.QA_REPORT, sender=self.name, content=report.model_dump_json(),
            summary=f"{outcome}: {len(report.failures)} of {report.tests_run} failing",
            in_reply_to=message.id, passed=report.passed, version=message.metadata.get("version"),
        )
        if not report.passed:
            self.hand_off(
                message.sender, "qa_report", artifact=report.model_dump_json(), in_reply_to=record.id,
                summary=f"{len(report.failures)} failures", next_action="fix every failure",
            )
        elif self.reviewer:
            self.hand_off(
                self.ctx.agent_name("reviewer"), "release",
                artifact=CodeArtifact.model_construct(code=code).model_dump_json(),
                summary=f"passes {report.tests_run} tests", next_action="review before release",
                in_reply_to=record.id,
            )
        else:
            self.ctx.publish(
                intent=Intent.STATUS, sender=self.name, summary="QA passed", in_reply_to=record.id,
                stop_reason="qa_passed",
            )


class ReviewerAgent(HandoffAgent):
    """The mandatory gate before completion: reviews a version QA passed; approval ends the
    line, anything else goes back to the engineer (never an unreadable review as approval)."""

    role = "reviewer"
    schemas: ClassVar[dict[str, type[BaseModel]]] = {"release": CodeArtifact}

    def __init__(self, ctx: TaskContext, critic: dspy.Module, *, max_retries: int) -> None:
        super().__init__(ctx, max_retries=max_retries)
        self.critic = critic

    def accepted(
        self, stage: str, artifact: BaseModel | None, envelope: Handoff, message: Message
    ) -> None:
        code = artifact.code if isinstance(artifact, CodeArtifact) else code_of(envelope)
        reports = [m for m in self.ctx.history() if m.intent == Intent.QA_REPORT]
        step = call_role(self.critic, self.role, prompt=self.ctx.prompt, code=code,
                         execution_feedback=reports[-1].content if reports else "none")
        verdict = step.verdict if step.parsed else "unparsed"
        if verdict == "unparsed":  # the line stops without the review's say: a fallback
            fell_back(self.role)
        if verdict in ("approve", "unparsed"):
            self.ctx.publish(
                intent=Intent.STATUS, sender=self.name, summary=f"review: {verdict}",
                in_reply_to=message.id, step=step, verdict=verdict,
                stop_reason="approved" if verdict == "approve" else "unparsed_review",
            )
            return
        review = Review(
            verdict=verdict, findings=step.findings or [], summary=step.summary or ""
        )
        self.hand_off(
            self.ctx.agent_name("engineer"), "review", artifact=review.model_dump_json(), step=step,
            summary=f"review: {verdict}", next_action="address every finding", in_reply_to=message.id,
        )
