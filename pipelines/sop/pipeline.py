"""sop: a MetaGPT-style assembly line — product manager → architect → engineer → QA engineer
(→ an optional reviewer gate) — handing typed artifacts through the pool.

Every handoff carries summary, artifact, blockers and next action; the receiver validates the
artifact against its stage's schema (Spec, Design, CodeArtifact, QaReport, Review) and
acknowledges it or returns it to the sender with the error (``handoff.rejected``, counted per
problem). The QA engineer writes ``n_tests`` asserts from the spec and the prompt alone, runs
each version on them and on the prompt's visible examples in the sandbox, and reports failures
(expected vs got) to the engineer until QA passes or ``max_iterations`` versions were written.
"""

from __future__ import annotations

import dspy
from pydantic import Field

from critiquelab.pipelines.params import FeedbackTimeout, GeneratedTestCount, MaxIterations, PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.sop.agents import (
    EngineerAgent,
    ProductManagerAgent,
    QaEngineerAgent,
    ReviewerAgent,
    SopArchitectAgent,
)
from critiquelab.pipelines.sop.outcome import SopOutcome
from critiquelab.pipelines.threads import converse
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.handoff import code_of
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.critic import Critic
from critiquelab.signatures.engineer import Engineer
from critiquelab.signatures.handoff import Handoff
from critiquelab.signatures.product_manager import ProductManager
from critiquelab.signatures.qa_engineer import QaEngineer
from critiquelab.signatures.sop_architect import SopArchitect


class SopParams(PipelineParams):
    """Parameters of ``sop``."""

    max_iterations: MaxIterations = Field(
        description="Versions the engineer writes at most (the first, then one per failing QA report "
        "or review); a version returned unrun (it does not compile) is rewritten without counting.",
    )
    n_tests: GeneratedTestCount = Field(
        default=5,
        description="Asserts the QA engineer writes from the spec and the prompt (usable ones are "
        "'assert f(args) == literal' lines); the prompt's visible examples are run too.",
    )
    max_handoff_retries: int = Field(
        default=1, ge=0, le=5,
        description="Times a receiver returns one stage's artifact to its sender for failing its "
        "schema; then it goes on with the artifact as it is (recorded as unvalidated).",
    )
    reviewer: bool = Field(
        default=False,
        description="A mandatory reviewer gate: a version QA passed completes only when the reviewer "
        "approves; otherwise the review goes back to the engineer.",
    )
    feedback_timeout_s: FeedbackTimeout = Field(
        description="Wall-clock limit in seconds for running one version on the tests (per call).",
    )


def sop_outcome(history: list[Message], thread_id: str) -> tuple[str, SopOutcome]:
    """Final code and the line's outcome (first code, acceptance tests, figures), from its messages."""
    code_handoffs = [m for m in history if m.intent == Intent.HANDOFF and m.metadata.get("stage") == "code"]
    codes = [code_of(Handoff.model_validate_json(m.content)) for m in code_handoffs]
    reports = [m for m in history if m.intent == Intent.QA_REPORT]
    stops = [m.metadata["stop_reason"] for m in history if "stop_reason" in m.metadata]
    acks = [m for m in history if m.intent == Intent.HANDOFF_ACCEPTED]
    traces = [m.metadata["trace"] for m in history if "trace" in m.metadata]
    tests = [m for m in history if m.intent == Intent.GENERATED_TESTS]
    reviewed = [m for m in history if m.intent == Intent.HANDOFF and m.metadata.get("stage") == "review"]
    versions = len({m.metadata.get("version") for m in code_handoffs})
    unparsed = sum(1 for t in traces if not t.get("parsed", True))
    return codes[-1] if codes else "", SopOutcome(
        first_code=codes[0] if codes else "", iterations=max(1, versions), parsed=unparsed == 0,
        thread_id=thread_id,
        # Scored against the reference solution by the runner, after the run (their accuracy).
        generated_test_code=tests[0].content if tests else "",
        versions=versions,
        qa_runs=len(reports),
        qa_passed=bool(reports) and bool(reports[-1].metadata["passed"]),
        changes_requested=any(not m.metadata["passed"] for m in reports) or bool(reviewed),
        handoffs=sum(m.intent == Intent.HANDOFF for m in history),
        handoff_rejections=sum(m.intent == Intent.HANDOFF_REJECTED for m in history),
        unvalidated_handoffs=sum(not m.metadata["validated"] for m in acks),
        stop_reason=stops[-1] if stops else "incomplete",
        messages=len(history),
        unparsed_steps=unparsed,
    )


@register_pipeline(
    "sop", params=SopParams, outcome=SopOutcome,
    roles=("product_manager", "architect", "engineer", "qa_engineer", "reviewer"),
)
class Sop(dspy.Module):
    """MetaGPT-style assembly line: product manager → architect → engineer → QA engineer (tests
    from the spec and prompt, run in the sandbox) → engineer revises until QA passes; typed,
    validated handoffs; optional reviewer gate.

    Parameters: :class:`SopParams` (``Sop(SopParams(max_iterations=2))``).
    """

    def __init__(self, params: SopParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else SopParams.defaults()
        self.product_manager = dspy.Predict(ProductManager)
        self.architect = dspy.Predict(SopArchitect)
        self.engineer = dspy.Predict(Engineer)
        self.qa_engineer = dspy.Predict(QaEngineer)
        self.reviewer = dspy.Predict(Critic) if self.params.reviewer else None

    def _agents(self, ctx: TaskContext) -> list[Agent]:
        retries = self.params.max_handoff_retries
        agents: list[Agent] = [
            ProductManagerAgent(ctx, self.product_manager, max_retries=retries),
            SopArchitectAgent(ctx, self.architect, max_retries=retries),
            EngineerAgent(ctx, self.engineer, max_retries=retries, max_versions=self.params.max_iterations),
            QaEngineerAgent(
                ctx, self.qa_engineer, max_retries=retries, n_tests=self.params.n_tests,
                timeout_s=self.params.feedback_timeout_s, reviewer=self.reviewer is not None,
            ),
        ]
        if self.reviewer is not None:
            agents.append(ReviewerAgent(ctx, self.reviewer, max_retries=retries))
        return agents

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        agents = self._agents(ctx)
        final, outcome = sop_outcome(converse(ctx, agents, agents[0].name), ctx.thread_id)
        return dspy.Prediction(code=final, outcome=outcome)
