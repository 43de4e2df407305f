"""``decision_outcome`` entries: a decision a role made on the task's thread, paired with what
the code it led to did on the prompt's visible examples.

The decisions, each where a role chooses what the code becomes (one recogniser per pipeline):

- critic loop: the fixer revising the code after a review that asked for changes (the outcome
  of its revision); the critic approving a version (the outcome of the version it approved);
- debate: the judge choosing or merging a candidate (the outcome of what it chose);
- architect: the architect retrying or reassigning a failed task (the outcome of the next
  integrated solution) or aborting the run (the solution it stopped with, if any); the team
  reviewer approving (the solution it approved) or asking for changes / rejecting (the
  revision that followed);
- sop: the QA engineer passing a version (that version) or failing it back to the engineer (the
  engineer's next version); the optional reviewer gate approving a version (that version). A QA
  verdict's reason is counts only: the QA engineer's generated tests stay off the entry, and its
  outcome is the visible examples', never the generated tests'.

A decision that led to no code (an abort before any integration, a request for changes with no
later version) has nothing to be judged by and is left out. Outcomes come from the visible
examples only — an ``execution_feedback`` message already on the thread for that code, else a
fresh run of them; a decision whose code cannot be checked (no runnable example in the prompt)
teaches nothing and writes no entry. Hidden tests never get here.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from critiquelab.runtime.handoff import code_of
from critiquelab.runtime.memory.entries import MemoryEntry, task_tags
from critiquelab.runtime.memory.reflection import VisibleOutcome, findings_of, task_summary
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.handoff import Handoff
from critiquelab.signatures.qa_engineer import QaReport
from critiquelab.signatures.team_contracts import ArchitectDecision

MAX_REASON_CHARS = 300  # the reason keeps an entry short enough to inject beside others

# Runs code on the prompt's visible examples (``reflection.visible_outcome`` bound to the task).
CheckCode = Callable[[str], VisibleOutcome]

# What each kind of decision says, after "Decision: ".
_ACTIONS = {
    "revise": "the fixer revised the code after a review",
    "approve": "the reviewer approved the code",
    "choose": "the judge chose one candidate",
    "merge": "the judge merged the candidates",
    "retry": "the architect gave a failed task to the same developer again",
    "reassign": "the architect reassigned a failed task to another developer",
    "abort": "the architect aborted the run after a task failed",
    "request_changes": "the reviewer asked for changes",
    "reject": "the reviewer rejected the code",
    "qa_pass": "the QA engineer passed the code",
    "qa_fail": "the QA engineer sent the code back to the engineer",
}
# Verdicts on the code they judged: the outcome says whether they were right.
_VERDICTS = {"approve": "approval", "qa_pass": "pass"}


@dataclass(frozen=True)
class Decision:
    """One decision: who made it, what it was, why (in the role's own words) and its code."""

    role: str
    kind: str  # a key of _ACTIONS
    reason: str
    code: str
    message_id: str
    code_message_id: str  # the message whose code the outcome is about


Thread = dict[str, Message]  # a thread's messages by id


def _role(message: Message, default: str) -> str:
    return str((message.metadata.get("trace") or {}).get("role") or default)


def _critic_loop(history: list[Message], by_id: Thread) -> list[Decision]:
    """The fixer's revisions after a review and the critic's approvals."""
    found = []
    for m in history:
        if m.intent == Intent.FIX:
            review = by_id.get(m.in_reply_to or "")
            if review is None or review.intent not in (Intent.CRITIQUE, Intent.META_CRITIQUE):
                continue  # a self-refinement, retry or team integration, not a choice on a review
            reason = "; ".join(findings_of(review)) or review.summary
            found.append(Decision(_role(m, "fixer"), "revise", reason, m.content, m.id, m.id))
        elif m.intent == Intent.CRITIQUE and m.metadata.get("verdict") == "approve":
            reviewed = by_id.get(str(m.metadata.get("code_message_id") or ""))
            if reviewed is not None:
                found.append(Decision(_role(m, "critic"), "approve", "; ".join(findings_of(m)),
                                      reviewed.content, m.id, reviewed.id))
    return found


def _debate(history: list[Message], by_id: Thread) -> list[Decision]:
    """The judge's choices and merges (not a fallback, not vote's count: no role chose those)."""
    return [
        Decision(_role(m, "judge"), "choose" if m.metadata["decision"] == "chosen" else "merge",
                 str(m.metadata.get("rationale") or ""), m.content, m.id, m.id)
        for m in history
        if m.intent == Intent.VERDICT and m.metadata.get("decision") in ("chosen", "merged")
    ]


# The team reviewer's verdicts (ReviewerOutput) as decision kinds; an unparsed review decides nothing.
_TEAM_VERDICTS = {"approved": "approve", "changes_requested": "request_changes", "rejected": "reject"}


def _architect(history: list[Message], by_id: Thread) -> list[Decision]:
    """The architect's retry / reassign / abort after a failed task and the team reviewer's
    verdicts, each with the integrated solution it led to."""
    integrated = [i for i, m in enumerate(history) if m.intent in (Intent.OUTPUT_COMPLETE, Intent.FIX)
                  and m.metadata.get("session_kind") == "orchestrator"]
    found = []
    for i, m in enumerate(history):
        after = bisect_right(integrated, i)  # integrated is in thread order: no scan per message
        later = history[integrated[after]] if after < len(integrated) else None
        if m.intent == Intent.DECISION and m.metadata.get("contract") == "ArchitectDecision":
            decision = ArchitectDecision.model_validate_json(m.content)
            # An abort leaves the run with the last solution integrated before it.
            before = bisect_left(integrated, i)
            earlier = history[integrated[before - 1]] if before > 0 else None
            led_to = later if decision.action != "abort" else earlier
            if led_to is not None:
                found.append(Decision(_role(m, "architect"), decision.action,
                                      f"task {decision.task_id}: {decision.reason}", led_to.content, m.id,
                                      led_to.id))
        elif m.intent == Intent.CRITIQUE and m.metadata.get("contract") == "ReviewerOutput":
            kind = _TEAM_VERDICTS.get(str(m.metadata.get("verdict")))
            request = by_id.get(m.in_reply_to or "")
            reviewed = by_id.get(request.in_reply_to or "") if request is not None else None
            led_to = reviewed if kind == "approve" else later
            if kind is not None and led_to is not None:
                reason = "; ".join(findings_of(m)) or json.loads(m.content).get("summary", "")
                found.append(Decision(_role(m, "team_reviewer"), kind, reason, led_to.content, m.id,
                                      led_to.id))
    return found


def _next_code_handoff(history: list[Message], index: int) -> Message | None:
    return next((m for m in history[index + 1:]
                 if m.intent == Intent.HANDOFF and m.metadata.get("stage") == "code"), None)


def _sop(history: list[Message], by_id: Thread) -> list[Decision]:
    """The QA engineer's pass / fail verdicts and the reviewer gate's approvals."""
    found = []
    for i, m in enumerate(history):
        handed = by_id.get(m.in_reply_to or "")
        if handed is None or handed.intent != Intent.HANDOFF:
            continue
        if m.intent == Intent.QA_REPORT:
            report = QaReport.model_validate_json(m.content)
            led_to: Message | None
            if report.passed:
                kind, reason, led_to = "qa_pass", f"{report.tests_run} tests run, none failing", handed
            else:
                kind, led_to = "qa_fail", _next_code_handoff(history, i)
                reason = f"{len(report.failures)} failing of {report.tests_run} tests run"
            if led_to is not None:
                code = code_of(Handoff.model_validate_json(led_to.content))
                found.append(Decision(_role(m, "qa_engineer"), kind, reason, code, m.id, led_to.id))
        elif m.metadata.get("verdict") == "approve" and handed.metadata.get("stage") == "release":
            summary = ((m.metadata.get("trace") or {}).get("outputs") or {}).get("summary") or ""
            found.append(Decision(_role(m, "reviewer"), "approve", str(summary),
                                  code_of(Handoff.model_validate_json(handed.content)), m.id, handed.id))
    return found


_RECOGNISERS = (_critic_loop, _debate, _architect, _sop)


def decisions_in(history: list[Message]) -> list[Decision]:
    """Every decision on the thread, as each pipeline's recogniser finds them."""
    by_id = {m.id: m for m in history}
    return [decision for recognise in _RECOGNISERS for decision in recognise(history, by_id)]


def _feedback_outcome(code_message_id: str, history: list[Message]) -> VisibleOutcome | None:
    """The visible-example result already published for that code, if the pipeline ran them."""
    for m in history:
        if m.intent == Intent.EXECUTION_FEEDBACK and m.in_reply_to == code_message_id:
            failing = sum(line.startswith("FAIL") for line in m.content.splitlines())
            return VisibleOutcome(m.content, failing == 0)
    return None


def _sentence(decision: Decision, passed: bool) -> str:
    reason = " ".join(decision.reason.split())[:MAX_REASON_CHARS]
    if decision.kind == "revise":
        reason = reason or "no findings"
    result = "the visible examples passed" if passed else "visible examples still failed"
    said = f"Decision: {_ACTIONS[decision.kind]}{f' ({reason})' if reason else ''}. Outcome: {result}"
    verdict = _VERDICTS.get(decision.kind)
    if verdict is None:
        return f"{said}."
    return f"{said}; the {verdict} was {'rightly' if passed else 'wrongly'} given."


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
