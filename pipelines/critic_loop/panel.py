"""A panel of critics for the critic loop: critics with different focuses (correctness, edge
cases, performance …) review the same version concurrently, and their reviews are bundled into
one critique for the fixer (the PRD's batching of pending feedback).

Each panel review is a ``panel_review`` message of its own (the critic kind in ``metadata``);
the bundle is the loop's ``critique``, so the fixer, the meta-critic and the loop's metrics
read it exactly as a single critic's review.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dspy

from critiquelab.pipelines.critic_loop.agents import CHANGES, CriticAgent
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.parallel_agents import ParallelCalls
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult, call_role, fell_back
from critiquelab.signatures.focused_critic import FOCUS_INSTRUCTIONS
from critiquelab.signatures.review import Finding, Review


def _review_of(step: RoleResult) -> Review | None:
    if not step.parsed:
        return None  # never read an unparseable review as an approval
    return Review(verdict=step.verdict, findings=step.findings or [],
                  summary=step.summary or "")


def bundle_reviews(reviews: Mapping[str, Review | None]) -> tuple[str, Review | None]:
    """One critique from the panel's reviews (``None``: unparsed), in panel order: reject if
    any critic rejects, else request changes if any asks for them, else ``unparsed`` (and no
    review: nothing to act on, never an approval) if a review could not be read, else approve.
    Findings are kept, each tagged with its critic."""
    verdicts = [review.verdict if review else "unparsed" for review in reviews.values()]
    verdict = next((v for v in ("reject", "request_changes", "unparsed") if v in verdicts), "approve")
    findings = [
        Finding(**{**finding.model_dump(), "description": f"[{kind}] {finding.description}"})
        for kind, review in reviews.items() if review for finding in review.findings
    ]
    if verdict == "unparsed":
        return verdict, None
    summary = "; ".join(f"{kind}: {v}" for kind, v in zip(reviews, verdicts, strict=True))
    return verdict, Review(verdict=verdict, findings=findings, summary=summary)


class PanelCriticAgent(CriticAgent):
    """Reviews each new version with every critic of the panel (up to ``parallel`` calls at
    once; requests and results do not depend on it) and publishes one bundled critique."""

    def __init__(
        self, ctx: TaskContext, critic: dspy.Module, *, critics: Sequence[str], parallel: int,
        max_reviews: int, run_examples: bool, timeout_s: float,
    ) -> None:
        super().__init__(ctx, critic, max_reviews=max_reviews, run_examples=run_examples, timeout_s=timeout_s)
        self.critics, self.parallel = list(critics), parallel

    def _review(self, kind: str, code: str, feedback: str) -> RoleResult:
        return call_role(
            self.critic, f"critic_{kind}", prompt=self.ctx.prompt, code=code,
            execution_feedback=feedback, focus=FOCUS_INSTRUCTIONS[kind],
        )

    def handle(self, message: Message) -> None:
        if self._at_limit(message):
            return
        self.reviews += 1
        feedback = self._feedback(message)
        with ParallelCalls(self.parallel) as calls:
            futures = [calls.submit(self._review, kind, message.content, feedback) for kind in self.critics]
            steps = [future.result() for future in futures]  # panel order, whichever finished first
        reviews: dict[str, Review | None] = {}
        verdict: str  # a review's verdict, or "unparsed"
        for kind, step in zip(self.critics, steps, strict=True):
            reviews[kind] = review = _review_of(step)
            verdict = review.verdict if review else "unparsed"
            if review is None:  # the panel goes on without this critic's say
                fell_back(f"critic_{kind}")
            self.ctx.publish(
                intent=Intent.PANEL_REVIEW, sender=self.ctx.agent_name(f"critic_{kind}"),
                content=review.model_dump_json() if review else step.raw,
                summary=f"{kind} review {self.reviews}: {verdict}", in_reply_to=message.id, step=step,
                verdict=verdict, critic=kind, iteration=self.reviews, code_message_id=message.id,
            )
        verdict, bundle = bundle_reviews(reviews)
        unread = "\n\n".join(step.raw for step in steps if not step.parsed)
        self.ctx.publish(
            intent=Intent.CRITIQUE, sender=self.name, content=bundle.model_dump_json() if bundle else unread,
            summary=f"panel review {self.reviews}: {verdict}", in_reply_to=message.id,
            verdict=verdict, iteration=self.reviews, code_message_id=message.id,
            panel={kind: (r.verdict if r else "unparsed") for kind, r in reviews.items()},
        )


def critics_requesting_changes(history: Sequence[Message]) -> list[str]:
    """Critic kinds that asked for changes in any review, in panel order — per critic, what the
    loop's ``changes_requested`` is for critique success rate."""
    asked = [str(m.metadata["critic"]) for m in history
             if m.intent == Intent.PANEL_REVIEW and m.metadata["verdict"] in CHANGES]
    return list(dict.fromkeys(asked))
