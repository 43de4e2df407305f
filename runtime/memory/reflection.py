"""After a task: a reflector reads the task's thread and writes what it learned to memory.

Only visible signals: the prompt, the agents' own messages (code, reviews, reflections) and
results of running the final code on the examples the prompt shows. Hidden tests are scored
after the pipeline returns and never reach this module. Mining turns mistake → correction →
outcome sequences of the thread into ``error_pattern`` entries, and reviews that asked for
changes into ``review_feedback`` entries of the critic, shared with the roles that fix code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import dspy

from critiquelab.eval.visible_examples import code_feedback, visible_examples
from critiquelab.runtime.agents import code_messages
from critiquelab.runtime.memory.entries import MemoryEntry, task_tags
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult, call_role
from critiquelab.signatures.reflector import Reflector

MAX_HISTORY_CHARS = 1500  # the reflector's view of the thread stays well inside a small context


@dataclass(frozen=True)
class VisibleOutcome:
    """The final code on the prompt's visible examples. ``passed`` is None when the prompt
    shows no runnable example (nothing is known)."""

    text: str
    passed: bool | None


def visible_outcome(prompt: str, entry_point: str, code: str, *, timeout_s: float = 5.0) -> VisibleOutcome:
    examples = visible_examples(prompt, entry_point)
    if not examples:
        return VisibleOutcome("no runnable examples in the problem", None)
    feedback = code_feedback(prompt, code, entry_point, examples, timeout_s=timeout_s)
    return VisibleOutcome(feedback.report, feedback.all_passed)


def findings_of(critique: Message) -> list[str]:
    try:
        review = json.loads(critique.content)
    except json.JSONDecodeError:
        return []
    findings = review.get("findings", [])
    return [f"{f.get('description', '')} {f.get('suggestion', '')}".strip() for f in findings]


def render_history(history: list[Message]) -> str:
    """Reviews, reflections, revisions and visible results of a thread, one line each."""
    lines = []
    for m in history:
        if m.intent in (Intent.CRITIQUE, Intent.META_CRITIQUE):
            lines.append(f"{m.summary}: " + "; ".join(findings_of(m)))
        elif m.intent in (Intent.FIX, Intent.REFLECTION, Intent.OUTPUT_COMPLETE):
            lines.append(m.summary if m.intent != Intent.REFLECTION else f"reflection: {m.content}")
        elif m.intent == Intent.EXECUTION_FEEDBACK:
            fails = sum(line.startswith("FAIL") for line in m.content.splitlines())
            lines.append(f"visible examples: {fails} failing")
    text = "\n".join(line for line in lines if line.strip())
    return text[-MAX_HISTORY_CHARS:] or "none"


def author_of(history: list[Message]) -> str:
    """The role that wrote the final code."""
    codes = code_messages(history)
    trace = codes[-1].metadata.get("trace", {}) if codes else {}
    return str(trace.get("role") or "coder")


def reflect(
    reflector: dspy.Module, *, task_id: str, run_id: str, prompt: str, code: str, outcome: VisibleOutcome,
    history: list[Message],
) -> tuple[MemoryEntry | None, RoleResult]:
    """One reflector call: a ``reflection`` entry about the final code's author (None when the
    reply could not be parsed) and the call itself, for the trace."""
    step = call_role(reflector, "reflector", prompt=prompt, code=code, outcome=outcome.text,
                     history=render_history(history))
    lesson = str(step.lesson or "").strip()
    if not step.parsed or not lesson:
        return None, step
    pattern = str(step.pattern or "").strip()
    return MemoryEntry(
        role=author_of(history), type="reflection", task_id=task_id, run_id=run_id, tags=task_tags(prompt),
        content=f"{pattern}: {lesson}" if pattern else lesson,
        context={
            "what_went_wrong": step.what_went_wrong, "what_worked": step.what_worked,
            "pattern": pattern, "visible_passed": outcome.passed, "task_summary": task_summary(prompt),
        },
    ), step


def task_summary(prompt: str) -> str:
    """The first line of the docstring: what the task is, for probes and readers."""
    inside = prompt.split('"""', 2)[1] if prompt.count('"""') >= 2 else prompt
    return next((line.strip() for line in inside.splitlines() if line.strip()), "")[:200]


def _outcome_of(code_id: str, history: list[Message]) -> str | None:
    for m in history:
        if m.intent == Intent.EXECUTION_FEEDBACK and m.in_reply_to == code_id:
            fails = sum(line.startswith("FAIL") for line in m.content.splitlines())
            return f"{fails} visible examples still failed" if fails else "the visible examples then passed"
        if m.intent == Intent.CRITIQUE and m.metadata.get("code_message_id") == code_id:
            return f"the reviewer then said {m.metadata.get('verdict')}"
    return None


def mine(history: list[Message], *, task_id: str, run_id: str, prompt: str) -> list[MemoryEntry]:
    """``error_pattern`` entries from mistake → correction → outcome sequences, and
    ``review_feedback`` entries from reviews that asked for changes."""
    by_id = {m.id: m for m in history}
    tags, entries = task_tags(prompt), []
    for fix in (m for m in history if m.intent == Intent.FIX):
        cause = by_id.get(fix.in_reply_to or "")
        if cause is None:
            continue
        reviewed = cause.intent in (Intent.CRITIQUE, Intent.META_CRITIQUE)
        mistake = "; ".join(findings_of(cause)) if reviewed else cause.content
        outcome = _outcome_of(fix.id, history)
        if not mistake.strip() or outcome is None:
            continue
        entries.append(MemoryEntry(
            # A reviewer's finding is the critic's pattern (shared to the roles that fix code); a
            # reflection's is about the code the coder wrote.
            role="critic" if cause.intent != Intent.REFLECTION else "coder", type="error_pattern",
            task_id=task_id, run_id=run_id, tags=tags,
            content=f"Mistake: {mistake[:400]} Correction: {fix.summary}. Outcome: {outcome}.",
            context={"mistake": mistake[:400], "outcome": outcome, "task_summary": task_summary(prompt)},
        ))
    for critique in (m for m in history if m.intent == Intent.CRITIQUE):
        findings = findings_of(critique)
        if critique.metadata.get("verdict") in ("request_changes", "reject") and findings:
            entries.append(MemoryEntry(
                role="critic", type="review_feedback", task_id=task_id, run_id=run_id, tags=tags,
                content="Reviewers found: " + "; ".join(findings)[:400],
                context={"verdict": critique.metadata.get("verdict"), "task_summary": task_summary(prompt)},
            ))
    return entries


def new_reflector() -> dspy.Module:
    return dspy.Predict(Reflector)
