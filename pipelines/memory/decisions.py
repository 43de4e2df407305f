"""``decision_outcome`` entries: a decision a role made on the task's thread, paired with what
the code it led to did on the prompt's visible examples.

Three decisions, each where a role chooses what the code becomes:

- the fixer revising the code after a review that asked for changes (critic loop): the outcome
  of its revision;
- the critic approving a version (critic loop): the outcome of the version it approved;
- the debate judge choosing or merging a candidate: the outcome of what it chose.

Outcomes come from the visible examples only — an ``execution_feedback`` message already on the
thread for that code, else a fresh run of them; a decision whose code cannot be checked (no
runnable example in the prompt) teaches nothing and writes no entry. Hidden tests never get here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipelines.memory.entries import MemoryEntry, task_tags
from pipelines.memory.reflection import VisibleOutcome, findings_of, task_summary
from pipelines.pool.messages import Intent, Message

MAX_REASON_CHARS = 300  # the reason keeps an entry short enough to inject beside others

# Runs code on the prompt's visible examples (``reflection.visible_outcome`` bound to the task).
CheckCode = Callable[[str], VisibleOutcome]


@dataclass(frozen=True)
class Decision:
    """One decision: who made it, what it was, why (in the role's own words) and its code."""

    role: str
    kind: str  # revise, approve, choose, merge
    reason: str
    code: str
    message_id: str
    code_message_id: str  # the message whose code the outcome is about


def _role(message: Message, default: str) -> str:
    return str((message.metadata.get("trace") or {}).get("role") or default)


def decisions_in(history: list[Message]) -> list[Decision]:
    """The fixer's revisions after a review, the critic's approvals and the judge's verdicts."""
    by_id = {m.id: m for m in history}
    found: list[Decision] = []
    for m in history:
        if m.intent == Intent.FIX:
            review = by_id.get(m.in_reply_to or "")
            if review is None or review.intent not in (Intent.CRITIQUE, Intent.META_CRITIQUE):
                continue  # a self-refinement or retry, not a choice made on a review
            reason = "; ".join(findings_of(review)) or review.summary
            found.append(Decision(_role(m, "fixer"), "revise", reason, m.content, m.id, m.id))
        elif m.intent == Intent.CRITIQUE and m.metadata.get("verdict") == "approve":
            reviewed = by_id.get(str(m.metadata.get("code_message_id") or ""))
            if reviewed is not None:
                found.append(Decision(_role(m, "critic"), "approve", "; ".join(findings_of(m)),
                                      reviewed.content, m.id, reviewed.id))
        elif m.intent == Intent.VERDICT and m.metadata.get("decision") in ("chosen", "merged"):
            kind = "choose" if m.metadata["decision"] == "chosen" else "merge"
            found.append(Decision(_role(m, "judge"), kind, str(m.metadata.get("rationale") or ""),
                                  m.content, m.id, m.id))
    return found


def _feedback_outcome(code_message_id: str, history: list[Message]) -> VisibleOutcome | None:
    """The visible-example result already published for that code, if the pipeline ran them."""
    for m in history:
        if m.intent == Intent.EXECUTION_FEEDBACK and m.in_reply_to == code_message_id:
            failing = sum(line.startswith("FAIL") for line in m.content.splitlines())
            return VisibleOutcome(m.content, failing == 0)
    return None


def _sentence(decision: Decision, passed: bool) -> str:
    reason = " ".join(decision.reason.split())[:MAX_REASON_CHARS]
    result = "the visible examples passed" if passed else "visible examples still failed"
    if decision.kind == "revise":
        return f"Decision: the fixer revised the code after a review ({reason or 'no findings'}). " \
               f"Outcome: {result}."
    if decision.kind == "approve":
        verdict = "rightly" if passed else "wrongly"
        return f"Decision: the reviewer approved the code{f' ({reason})' if reason else ''}. " \
               f"Outcome: {result}; the approval was {verdict} given."
    what = "chose one candidate" if decision.kind == "choose" else "merged the candidates"
    return f"Decision: the judge {what}{f' ({reason})' if reason else ''}. Outcome: {result}."


def decision_outcomes(
    history: list[Message], *, task_id: str, run_id: str, prompt: str, check: CheckCode
) -> list[MemoryEntry]:
    """One ``decision_outcome`` entry per decision whose code could be checked on the visible
    examples, about the role that decided, tagged with the task's tags."""
    entries, checked = [], {}
    for decision in decisions_in(history):
        outcome = _feedback_outcome(decision.code_message_id, history)
        if outcome is None:
            if decision.code not in checked:
                checked[decision.code] = check(decision.code)
            outcome = checked[decision.code]
        if outcome.passed is None:
            continue
        entries.append(MemoryEntry(
            role=decision.role, type="decision_outcome", task_id=task_id, run_id=run_id,
            tags=task_tags(prompt),
            # The task leads: recall by a similar task finds it, and the same decision on unlike
            # tasks is not one repeated pattern (for promotion and consolidation).
            content=f"On '{task_summary(prompt)}': {_sentence(decision, outcome.passed)}",
            context={"decision": decision.kind, "visible_passed": outcome.passed,
                     "message_id": decision.message_id, "task_summary": task_summary(prompt)},
        ))
    return entries
