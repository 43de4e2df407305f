"""architect: an architect decomposes the problem, developers write the parts in parallel under
typed contracts, the architect integrates them and a reviewer gates the result.

The architect plans (helper functions, edge cases; a small problem stays one task), delegates
each task to a developer — the tasks of one dependency wave at once — and integrates the code.
The reviewer runs it on the prompt's visible examples and decides; changes requested send every
task back with the feedback, up to ``max_iterations`` reviews. A developer that fails or times
out is reported to the architect, which retries, reassigns or aborts, and says so on the pool.
Each delegation is a sub-session of the task's thread, so the run exports as a session tree
(:mod:`critiquelab.pipelines.architect.session_tree`).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, wait
from typing import cast

import dspy
from pydantic import Field

from critiquelab.pipelines.agent_counts import agent_counts
from critiquelab.pipelines.architect.agents import (
    Attempt,
    DeveloperWorker,
    ReviewerWorker,
    SessionRef,
    publish_in,
)
from critiquelab.pipelines.architect.outcome import ArchitectOutcome
from critiquelab.pipelines.architect.plan import Plan, integrate, make_plan
from critiquelab.pipelines.params import FeedbackTimeout, MaxIterations, ParallelAgents, PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.threads import converse
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.parallel_agents import MAX_PARALLEL_AGENTS, ParallelCalls
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role, fell_back
from critiquelab.signatures.architect import Architect
from critiquelab.signatures.developer import Developer
from critiquelab.signatures.team_contracts import (
    ArchitectDecision,
    ArchitectPlan,
    DeveloperInput,
    DeveloperOutput,
    ReviewerInput,
    ReviewerOutput,
    TaskAssignment,
)
from critiquelab.signatures.team_reviewer import TeamReviewer


class ArchitectParams(PipelineParams):
    """Parameters of ``architect``."""

    developers: int = Field(default=2, ge=1, le=MAX_PARALLEL_AGENTS,
                            description="Developers the architect delegates tasks to.")
    max_iterations: MaxIterations = Field(description="Reviews before the team stops without "
                                "approval; each review that asks for changes sends the tasks back.")
    max_tasks: int = Field(default=3, ge=1, le=8, description="Most tasks a plan may have; a larger "
                           "plan falls back to the whole problem as one task.")
    max_task_attempts: int = Field(default=2, ge=1, description="Attempts a task gets (a failed one "
                                   "goes to the next developer) before the architect aborts the run.")
    developer_timeout_s: float = Field(default=600.0, gt=0, le=3600, description="Wall-clock seconds a "
                                       "developer may take on one task before it counts as failed.")
    parallel_agents: ParallelAgents = Field(
        default=2,
        description="Developers working at once (1: one after another). A task's request depends only "
        "on the tasks of earlier waves, so results do not depend on this.",
    )
    feedback_timeout_s: FeedbackTimeout = Field(description="Wall-clock limit in seconds for the "
                                                "reviewer's run of the code on the visible examples.")


class ArchitectAgent(Agent):
    """The orchestrator: plans, delegates, integrates, asks for reviews, handles failures."""

    role = "architect"

    def __init__(self, ctx: TaskContext, pipeline: ArchitectTeam) -> None:
        super().__init__(ctx)
        self.params = pipeline.params
        self.architect = pipeline.architect
        self.developers = [DeveloperWorker(ctx, i, pipeline.developer) for i in range(self.params.developers)]
        self.reviewer = ReviewerWorker(ctx, pipeline.reviewer, timeout_s=self.params.feedback_timeout_s)
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def handle(self, message: Message) -> None:
        root = SessionRef("architect", "orchestrator", self.name, None, message.id)
        plan = self._plan(root)
        code, feedback, stop = "", "", "max_iterations"
        with ParallelCalls(self.params.parallel_agents) as calls:
            for iteration in range(1, self.params.max_iterations + 1):
                outputs = self._develop(calls, plan, root, iteration, code, feedback)
                if outputs is None:
                    stop = "aborted"
                    break
                code, notes = integrate(plan, outputs)
                integrated = publish_in(
                    self.ctx, root, intent=Intent.OUTPUT_COMPLETE if iteration == 1 else Intent.FIX,
                    sender=self.name, content=code, summary=f"integrated solution {iteration}",
                    notes=notes, iteration=iteration,
                )
                review = self._review(plan, root, integrated, code, iteration)
                if review is None:
                    stop = "unparsed_review"
                    break
                if review.verdict == "approved":
                    stop = "approved"
                    break
                feedback = "\n".join(
                    [f"Reviewer verdict: {review.verdict}. {review.summary}",
                     *(f"{f.id} [{f.severity}/{f.category}] {f.description} {f.suggestion}".strip()
                       for f in review.findings),
                     f"Visible examples: {review.verification.passed}/{review.verification.examples} pass",
                     review.verification.report])
        publish_in(self.ctx, root, intent=Intent.STATUS, sender=self.name, summary=f"stopped: {stop}",
                   stop_reason=stop)

    def _plan(self, root: SessionRef) -> Plan:
        step = call_role(self.architect, self.role, prompt=self.ctx.prompt, entry_point=self.ctx.entry_point)
        proposed = [t if isinstance(t, TaskAssignment) else TaskAssignment.model_validate(t)
                    for t in step.tasks or []]
        plan = make_plan(proposed, self.ctx.entry_point, max_tasks=self.params.max_tasks)
        if not step.parsed:  # the default plan stands in for the architect's: a fallback
            fell_back(self.role)
            plan.notes.insert(0, f"the plan was unparseable ({step.error or 'no tasks read'})")
        contract = ArchitectPlan(tasks=plan.tasks, waves=[[t.task_id for t in w] for w in plan.waves],
                                 notes=plan.notes)
        publish_in(self.ctx, root, intent=Intent.PLAN, sender=self.name, contract=contract, step=step,
                   summary=f"plan: {len(plan.tasks)} task(s) in {len(plan.waves)} wave(s)")
        return plan

    def _context(
        self, task: TaskAssignment, done: dict[str, DeveloperOutput], code: str, feedback: str
    ) -> str:
        parts = [f"# from task {d}\n{done[d].code}" for d in task.dependencies if d in done]
        if feedback:
            parts += [f"The team's current integrated solution:\n{code}", f"Review feedback:\n{feedback}"]
        return "\n\n".join(parts)

    def _develop(
        self, calls: ParallelCalls, plan: Plan, root: SessionRef, iteration: int, code: str, feedback: str,
    ) -> dict[str, DeveloperOutput] | None:
        """Every task done, wave by wave (a wave's tasks in parallel); None if the run aborts."""
        done: dict[str, DeveloperOutput] = {}
        for wave in plan.waves:
            # Round robin over the plan, so every developer gets work even when waves are small.
            pending = [(task, 1, plan.tasks.index(task) % len(self.developers)) for task in wave]
            while pending:
                retry: list[tuple[TaskAssignment, int, int]] = []
                for start in range(0, len(pending), calls.limit):  # at most `limit` start together
                    for task, attempt, developer, output in self._delegate(
                        calls, pending[start:start + calls.limit], root, iteration, done, code, feedback
                    ):
                        if output.status == "completed":
                            done[task.task_id] = output
                            continue
                        decision = self._decide(task, attempt, developer, output, root)
                        if decision.action == "abort":
                            return None
                        retry.append((task, attempt + 1, (developer + 1) % len(self.developers)))
                pending = retry
        return done

    def _delegate(
        self, calls: ParallelCalls, batch: list[tuple[TaskAssignment, int, int]], root: SessionRef,
        iteration: int, done: dict[str, DeveloperOutput], code: str, feedback: str,
    ) -> list[tuple[TaskAssignment, int, int, DeveloperOutput]]:
        running: list[tuple[TaskAssignment, int, int, Attempt, Future[DeveloperOutput | None]]] = []
        started = time.monotonic()
        for task, attempt_no, developer in batch:
            worker = self.developers[developer]
            request = DeveloperInput(task=task, context=self._context(task, done, code, feedback),
                                     allowed_functions=[task.function_name], attempt=attempt_no)
            delegation = publish_in(
                self.ctx, root, intent=Intent.TASK_ASSIGNMENT, sender=self.name, recipient=worker.name,
                contract=request, summary=f"task {task.task_id} → {worker.name}", team_task=task.task_id,
            )
            session = SessionRef(f"{task.task_id}/iteration{iteration}/attempt{attempt_no}", "developer",
                                 worker.name, root.id, delegation.id)
            attempt = Attempt(session, self.params.developer_timeout_s)
            future = calls.submit(worker.work, request, attempt)
            running.append((task, attempt_no, developer, attempt, future))
        # A developer past its deadline is given up on here; its thread ends with its request
        # (a model call cannot be interrupted) and its answer is dropped (see Attempt).
        wait([r[-1] for r in running], timeout=max(0.0, started + self.params.developer_timeout_s
                                                 - time.monotonic()))
        results = []
        for task, attempt_no, developer, attempt, future in running:
            output = future.result() if future.done() else None
            if output is None and attempt.abandon():
                output = DeveloperOutput(
                    task_id=task.task_id, status="failed", summary="timed out",
                    blockers=[f"no answer within developer_timeout_s={self.params.developer_timeout_s:g}"],
                )
                publish_in(self.ctx, attempt.session, intent=Intent.STATUS, sender=self.name,
                           contract=output, summary=f"task {task.task_id}: timed out",
                           team_task=task.task_id, status="failed")
            # work() answers None only for an attempt given up on; this one answered first.
            answer = output if output is not None else cast(DeveloperOutput, future.result())
            results.append((task, attempt_no, developer, answer))
        return results

    def _decide(
        self, task: TaskAssignment, attempt: int, developer: int, output: DeveloperOutput, root: SessionRef
    ) -> ArchitectDecision:
        failed = self.developers[developer].name
        reason = "; ".join(output.blockers) or output.status
        if attempt >= self.params.max_task_attempts:
            decision = ArchitectDecision(task_id=task.task_id, action="abort", failed_developer=failed,
                                         reason=reason)
        else:
            following = self.developers[(developer + 1) % len(self.developers)].name
            decision = ArchitectDecision(
                task_id=task.task_id, action="reassign" if following != failed else "retry",
                failed_developer=failed, next_developer=following, reason=reason,
            )
        publish_in(self.ctx, root, intent=Intent.DECISION, sender=self.name, contract=decision,
                   summary=f"task {task.task_id}: {decision.action}", action=decision.action)
        return decision

    def _review(
        self, plan: Plan, root: SessionRef, integrated: Message, code: str, iteration: int
    ) -> ReviewerOutput | None:
        request = ReviewerInput(
            scope=f"integrated solution, iteration {iteration}",
            focus_areas=[f"{t.function_name}: {t.description}" for t in plan.tasks],
        )
        asked = publish_in(self.ctx, root, intent=Intent.REVIEW_REQUEST, sender=self.name,
                           recipient=self.reviewer.name, contract=request, in_reply_to=integrated.id,
                           summary=f"review iteration {iteration}")
        session = SessionRef(f"review/iteration{iteration}", "reviewer", self.reviewer.name, root.id,
                             asked.id)
        return self.reviewer.review(code, request, session)


def team_outcome(history: list[Message], codes: list[str], thread_id: str) -> ArchitectOutcome:
    """The outcome of one architect run (``codes``: its integrated solutions in order): loop and
    team figures, from its messages."""
    reviews = [m for m in history if m.intent == Intent.CRITIQUE]
    verdicts = [str(m.metadata.get("verdict")) for m in reviews]
    outputs = [m for m in history if m.metadata.get("contract") == "DeveloperOutput"]
    decisions = [str(m.metadata.get("action")) for m in history if m.intent == Intent.DECISION]
    stops = [m.metadata["stop_reason"] for m in history if "stop_reason" in m.metadata]
    plans = (ArchitectPlan.model_validate_json(m.content) for m in history if m.intent == Intent.PLAN)
    plan = next(plans, None)
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    unparsed = sum(1 for t in traces if not t.get("parsed", True))
    return ArchitectOutcome(
        first_code=codes[0] if codes else "", iterations=max(1, len(reviews)), parsed=unparsed == 0,
        thread_id=thread_id,
        reviews=len(reviews),
        first_verdict=verdicts[0] if verdicts else "",
        final_verdict=verdicts[-1] if verdicts else "",
        changes_requested=any(v in ("changes_requested", "rejected") for v in verdicts),
        stop_reason=stops[-1] if stops else "no_review",
        tasks_planned=len(plan.tasks) if plan else 0,
        waves=len(plan.waves) if plan else 0,
        developer_attempts=len(outputs),
        developer_failures=sum(m.metadata.get("status") != "completed" for m in outputs),
        retries=decisions.count("retry"), reassignments=decisions.count("reassign"),
        aborts=decisions.count("abort"),
        sessions=len({m.metadata.get("session") for m in history if m.metadata.get("session")}),
        messages=len(history),
        unparsed_steps=unparsed,
        agents=agent_counts(history),
    )


@register_pipeline(
    "architect", params=ArchitectParams, outcome=ArchitectOutcome,
    roles={"architect": "architect", "developer": "developer", "team_reviewer": "reviewer"},
)
class ArchitectTeam(dspy.Module):
    """An architect decomposes the problem into function tasks, developers write them in parallel
    under typed contracts, the architect integrates, a reviewer gates on the visible examples.

    Parameters: :class:`ArchitectParams` (``ArchitectTeam(ArchitectParams(developers=3))``).
    """

    def __init__(self, params: ArchitectParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else ArchitectParams.defaults()
        self.architect = dspy.Predict(Architect)
        self.developer = dspy.Predict(Developer)
        self.reviewer = dspy.Predict(TeamReviewer)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        architect = ArchitectAgent(ctx, self)
        history = converse(ctx, [architect], architect.name)
        codes = [m.content for m in history if m.sender == architect.name
                 and m.intent in (Intent.OUTPUT_COMPLETE, Intent.FIX)]
        outcome = team_outcome(history, codes, ctx.thread_id)
        return dspy.Prediction(code=codes[-1] if codes else "", outcome=outcome)
