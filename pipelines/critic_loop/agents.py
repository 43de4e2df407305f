"""The agents of the critic loop: critic (with optional execution feedback), meta-critic and
fixer (the coder is :class:`critiquelab.pipelines.coder_agent.CoderAgent`). Each reacts to messages on the
pool and publishes its step."""

from __future__ import annotations

import time
from typing import Any

import dspy

from critiquelab.eval.visible_examples import code_feedback, visible_examples
from critiquelab.pipelines.controls import oracle_feedback
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role, fell_back
from critiquelab.signatures.review import Finding, Review, render_review

CHANGES = ("request_changes", "reject")


class CriticAgent(Agent):
    """Reviews each new version of the code, up to ``max_reviews`` times per task."""

    role = "critic"

    def __init__(
        self, ctx: TaskContext, critic: dspy.Module, *, max_reviews: int,
        run_examples: bool, timeout_s: float,
    ) -> None:
        super().__init__(ctx)
        self.critic = critic
        self.max_reviews = max_reviews
        self.run_examples = run_examples
        self.timeout_s = timeout_s
        self.reviews = 0
        # Only the examples visible in the prompt: hidden tests never reach a prompt.
        self.examples = visible_examples(ctx.prompt, ctx.entry_point) if run_examples else []
        self.listen([Intent.OUTPUT_COMPLETE, Intent.FIX])

    def _feedback(self, code_message: Message) -> str:
        if not self.run_examples:
            return "none"
        start = time.monotonic()
        text = code_feedback(
            self.ctx.prompt, code_message.content, self.ctx.entry_point, self.examples,
            timeout_s=self.timeout_s,
        ).report
        self.ctx.publish(
            intent=Intent.EXECUTION_FEEDBACK, sender=self.ctx.agent_name("executor"),
            content=text, summary="results on the visible examples", in_reply_to=code_message.id,
            duration_s=round(time.monotonic() - start, 4),
        )
        return text

    def _at_limit(self, message: Message) -> bool:
        """Past ``max_reviews``: say so (the loop's stop reason) instead of reviewing."""
        if self.reviews < self.max_reviews:
            return False
        self.ctx.publish(
            intent=Intent.STATUS, sender=self.name, summary="max_iterations reached",
            in_reply_to=message.id, stop_reason="max_iterations",
        )
        return True

    def handle(self, message: Message) -> None:
        if self._at_limit(message):
            return
        self.reviews += 1
        feedback = self._feedback(message)
        step = call_role(
            self.critic, self.role, prompt=self.ctx.prompt, code=message.content,
            execution_feedback=feedback,
        )
        verdict: str  # a review's verdict, or "unparsed"
        if step.parsed:
            review = Review(
                verdict=step.verdict, findings=step.findings or [],
                summary=step.summary or "",
            )
            content, verdict = review.model_dump_json(), review.verdict
        else:
            # Never read an unparseable review as an approval; record it as what it is. The loop
            # then ends without the critic's say: a fallback, counted and warned about.
            content, verdict = step.raw, "unparsed"
            fell_back(self.role)
        self.ctx.publish(
            intent=Intent.CRITIQUE, sender=self.name, content=content,
            summary=f"review {self.reviews}: {verdict}", in_reply_to=message.id, step=step,
            verdict=verdict, iteration=self.reviews, code_message_id=message.id,
        )


def _apply_meta_review(review: Review, wrong: list[int], missing: list[str]) -> Review:
    """Drop the findings judged wrong, add the ones judged missing, and re-derive the verdict."""
    kept = [f for i, f in enumerate(review.findings, start=1) if i not in set(wrong)]
    added = [Finding(severity="major", category="bug", description=text) for text in missing if text]
    findings = kept + added
    if added and review.verdict == "approve":
        verdict = "request_changes"
    elif not findings and review.verdict in CHANGES:
        verdict = "approve"
    else:
        verdict = review.verdict
    return Review(verdict=verdict, findings=findings, summary=review.summary)


class MetaCriticAgent(Agent):
    """Reviews each critique before the fixer sees it ("reflection on reflection")."""

    role = "meta_critic"

    def __init__(self, ctx: TaskContext, meta_critic: dspy.Module) -> None:
        super().__init__(ctx)
        self.meta_critic = meta_critic
        self.listen([Intent.CRITIQUE])

    def handle(self, message: Message) -> None:
        passthrough = {k: message.metadata[k] for k in ("verdict", "code_message_id", "iteration")}
        if message.metadata["verdict"] == "unparsed":
            self.ctx.publish(
                intent=Intent.META_CRITIQUE, sender=self.name, content=message.content,
                summary="critique unparsed; passed through", in_reply_to=message.id, **passthrough,
            )
            return
        review = Review.model_validate_json(message.content)
        code = self.ctx.pool_message(passthrough["code_message_id"]).content
        step = call_role(
            self.meta_critic, self.role, prompt=self.ctx.prompt, code=code,
            review=render_review(review), execution_feedback=self.ctx.latest_feedback(),
        )
        if step.parsed:
            review = _apply_meta_review(
                review, list(step.wrong_findings or []), list(step.missing_issues or [])
            )
        passthrough["verdict"] = review.verdict
        self.ctx.publish(
            intent=Intent.META_CRITIQUE, sender=self.name, content=review.model_dump_json(),
            summary=f"meta-review: {review.verdict}", in_reply_to=message.id, step=step,
            **passthrough,
        )


class FixerAgent(Agent):
    """Revises the reviewed code when the (meta-)review asks for changes. As the oracle_feedback
    control (``oracle``) it also reads the hidden tests' report on that code
    (:mod:`critiquelab.pipelines.controls`; its signature then has the ``test_results`` field)."""

    role = "fixer"

    def __init__(
        self, ctx: TaskContext, fixer: dspy.Module, *, listen_to: Intent, oracle: bool = False
    ) -> None:
        super().__init__(ctx)
        self.fixer = fixer
        self.oracle = oracle
        self.listen([listen_to])

    def handle(self, message: Message) -> None:
        if message.metadata.get("verdict") not in CHANGES:
            return
        code = self.ctx.pool_message(message.metadata["code_message_id"]).content
        review = render_review(Review.model_validate_json(message.content))
        # Only the control adds the field: every other run's request is the same as before.
        control: dict[str, Any] = {"test_results": oracle_feedback(code)} if self.oracle else {}
        step = call_role(self.fixer, self.role, prompt=self.ctx.prompt, code=code, review=review, **control)
        self.ctx.publish(
            intent=Intent.FIX, sender=self.name, content=step.revised_code or step.raw or code,
            summary=f"revision after review {message.metadata.get('iteration')}",
            in_reply_to=message.id, step=step,
        )
