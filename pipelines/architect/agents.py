"""The architect team's workers: developers that turn a DeveloperInput into a DeveloperOutput,
and the reviewer that verifies the integrated code on the visible examples and decides. Each
works in its own session (a sub-thread of the task's thread, opened by the architect's
delegation message), and everything it produces is a message carrying its contract."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import dspy
from pydantic import BaseModel

from critiquelab.eval.visible_examples import code_feedback, visible_examples
from critiquelab.pipelines.architect.plan import defined_functions
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult, call_role, fell_back
from critiquelab.signatures.team_contracts import (
    DeveloperInput,
    DeveloperOutput,
    ReviewerInput,
    ReviewerOutput,
    ReviewFinding,
    Verification,
)


@dataclass(frozen=True)
class SessionRef:
    """A session of the tree: its id, kind, who works in it, its parent and what opened it."""

    id: str
    kind: str
    agent: str
    parent: str | None = None
    trigger: str | None = None


def publish_in(
    ctx: TaskContext, session: SessionRef, *, intent: Intent, sender: str, summary: str,
    contract: BaseModel | None = None, content: str = "", recipient: str | None = None,
    in_reply_to: str | None = None, step: RoleResult | None = None, **metadata: Any,
) -> Message:
    """Publish a message in ``session``; a contract becomes its content (JSON) and is named."""
    if contract is not None:
        content, metadata["contract"] = contract.model_dump_json(), type(contract).__name__
    return ctx.publish(
        intent=intent, sender=sender, content=content, summary=summary, recipient=recipient,
        in_reply_to=in_reply_to or session.trigger, step=step, session=session.id,
        session_kind=session.kind, session_agent=session.agent, parent_session=session.parent,
        trigger=session.trigger, **metadata,
    )


def render_assignment(request: DeveloperInput) -> str:
    task = request.task
    return (f"Task {task.task_id} (priority {task.priority}): define `{task.function_name}`.\n"
            f"{task.description}\nYou may define: {', '.join(request.allowed_functions)} "
            "(and private helpers starting with '_').")


@dataclass
class Attempt:
    """One delegation in flight. The architect may give up on it (timeout) while the developer
    is still working; the lock makes "the developer published" and "the architect gave up"
    exclusive, so a late answer never lands in the session after the failure was reported."""

    session: SessionRef
    timeout_s: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    published: bool = False
    abandoned: bool = False

    def abandon(self) -> bool:
        """Give up on it unless its answer is already out; True if given up."""
        with self.lock:
            if not self.published:
                self.abandoned = True
            return self.abandoned


class DeveloperWorker:
    """One developer: writes the function its task asks for."""

    def __init__(self, ctx: TaskContext, index: int, developer: dspy.Module) -> None:
        self.ctx, self.developer = ctx, developer
        self.name = ctx.agent_name(f"developer{index}")

    def work(self, request: DeveloperInput, attempt: Attempt) -> DeveloperOutput | None:
        """The output, published in the attempt's session; None if it came too late (the
        architect reports the timeout)."""
        start = time.monotonic()
        step = call_role(self.developer, "developer", prompt=self.ctx.prompt,
                         assignment=render_assignment(request), context=request.context or "none")
        output = self._assess(request, step)
        with attempt.lock:
            if attempt.abandoned or time.monotonic() - start > attempt.timeout_s:
                attempt.abandoned = True
                return None
            attempt.published = True
            publish_in(self.ctx, attempt.session, intent=Intent.OUTPUT_COMPLETE, sender=self.name,
                       summary=f"task {request.task.task_id}: {output.status}", contract=output,
                       step=step, team_task=request.task.task_id, status=output.status)
        return output

    def _assess(self, request: DeveloperInput, step: RoleResult) -> DeveloperOutput:
        task_id, wanted = request.task.task_id, request.task.function_name
        code = str(step.module_code or "").strip()
        if not step.parsed or not code:
            reason = step.error or "no code in the reply"
            return DeveloperOutput(task_id=task_id, status="failed", code=code, summary="no usable code",
                                   blockers=[reason])
        defined = defined_functions(code)
        if not defined:
            return DeveloperOutput(task_id=task_id, status="failed", code=code, summary="code does not parse",
                                   blockers=["the code does not parse as Python"])
        extra = [n for n in defined if n not in request.allowed_functions and not n.startswith("_")]
        notes = [f"defines functions outside its task: {', '.join(extra)}"] if extra else []
        if wanted not in defined:
            return DeveloperOutput(task_id=task_id, status="partial", code=code, notes=notes,
                                   summary=f"code without {wanted}", blockers=[f"{wanted} is not defined"])
        return DeveloperOutput(task_id=task_id, status="completed", code=code, notes=notes,
                               summary=f"defines {', '.join(defined)}")


class ReviewerWorker:
    """Runs the integrated code on the problem's visible examples, asks its model for a
    decision and returns a typed ReviewerOutput (None for an unparseable reply, which is never
    an approval). Approval requires the visible examples to pass."""

    def __init__(self, ctx: TaskContext, reviewer: dspy.Module, *, timeout_s: float) -> None:
        self.ctx, self.reviewer, self.timeout_s = ctx, reviewer, timeout_s
        self.name = ctx.agent_name("reviewer")
        self.examples = visible_examples(ctx.prompt, ctx.entry_point)

    def verify(self, code: str) -> Verification:
        feedback = code_feedback(self.ctx.prompt, code, self.ctx.entry_point, self.examples,
                                 timeout_s=self.timeout_s)
        return Verification(examples=len(self.examples), passed=feedback.passed, report=feedback.report)

    def review(self, code: str, request: ReviewerInput, session: SessionRef) -> ReviewerOutput | None:
        verification = self.verify(code)
        ask = (f"Scope: {request.scope}\nFocus: {'; '.join(request.focus_areas) or 'everything'}\n"
               f"Criteria: {'; '.join(request.criteria)}")
        step = call_role(self.reviewer, "team_reviewer", prompt=self.ctx.prompt, code=code,
                         review_request=ask, verification=verification.report)
        if not step.parsed:  # the team stops without the review's say: a fallback
            fell_back("team_reviewer")
            publish_in(self.ctx, session, intent=Intent.CRITIQUE, sender=self.name, content=step.raw,
                       summary="review unparsed", step=step, verdict="unparsed")
            return None
        findings = [f if isinstance(f, ReviewFinding) else ReviewFinding.model_validate(f)
                    for f in step.findings or []]
        findings = [f.model_copy(update={"id": f.id or f"F{i}"}) for i, f in enumerate(findings, start=1)]
        verdict, overridden = step.verdict, False
        if verdict == "approved" and not verification.all_passed:
            verdict, overridden = "changes_requested", True
            findings.append(ReviewFinding(
                id=f"F{len(findings) + 1}", severity="critical", category="bug",
                description=f"the visible examples fail: {verification.passed}/{verification.examples} pass",
                suggestion=verification.report[:500],
            ))
        output = ReviewerOutput(verdict=verdict, findings=findings, verification=verification,
                                summary=str(step.summary or ""), overridden=overridden)
        publish_in(self.ctx, session, intent=Intent.CRITIQUE, sender=self.name, contract=output,
                   summary=f"review: {verdict}", step=step, verdict=verdict)
        return output
