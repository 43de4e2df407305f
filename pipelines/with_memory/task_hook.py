"""A pipeline run with memory: recall during the task, reflect and learn after it.

:class:`WithMemory` wraps any pipeline: the task runs with its :class:`TaskMemory` installed
(role calls with the ``memories`` field receive recalled entries and skills); afterwards the
final code is run on the prompt's visible examples, a reflector reflects on the thread, the
thread is mined for error patterns, everything learned is written to the bank (with proposals
and promotion), a final code that passed every visible example becomes a verified demo (when the
config gives demos), and the skills the task received are credited with its visible outcome. The
reflector's call is part of the task's cost, and its step is a ``reflection`` message on the
task's thread.
"""

from __future__ import annotations

from typing import Any

import dspy

from critiquelab.pipelines.with_memory.outcome import with_memory_figures
from critiquelab.runtime.memory.bank import Written
from critiquelab.runtime.memory.code_patterns import code_pattern
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.memory.decisions import decision_outcomes
from critiquelab.runtime.memory.demos import verified_demo
from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.injection import (
    Injection,
    RunMemory,
    TaskMemory,
    used_memory,
    using_task_memory,
)
from critiquelab.runtime.memory.reflection import (
    VisibleOutcome,
    author_of,
    mine,
    new_reflector,
    reflect,
    visible_outcome,
)
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message


def _used(history: list[Message], injections: list[Injection], prompt: str) -> int:
    """Role calls whose output used what they received."""
    pending = [i for i in injections if i.ids]
    used = 0
    for message in history:
        trace = message.metadata.get("trace") or {}
        ids = trace.get("memory_ids")
        match = next((i for i in pending if i.ids == ids), None)
        if match is None:
            continue
        pending.remove(match)
        used += used_memory(str(trace.get("outputs") or trace.get("raw") or ""), match.texts, prompt)
    return used


def injection_figures(history: list[Message], injections: list[Injection], prompt: str) -> dict[str, int]:
    """What memory gave a task's role calls, for its outcome (see ``MemoryFigures``)."""
    return {
        "memory_role_calls": len(injections),
        "memory_injected_calls": sum(bool(i.ids) for i in injections),
        "memory_first_attempt_injected_calls": sum(bool(i.ids) and i.first_attempt for i in injections),
        "memory_demo_calls": sum(bool(i.demo_ids) for i in injections),
        "memory_foreign_calls": sum(i.foreign for i in injections),
        "memory_used_calls": _used(history, injections, prompt),
    }


def recorded(
    config: MemoryConfig, history: list[Message], *, task_id: str, run_id: str, prompt: str,
    entry_point: str, code: str, outcome: VisibleOutcome,
) -> list[MemoryEntry]:
    """The entries of ``config.record`` taken from a finished task's thread (no LM call);
    ``outcome`` is the final ``code`` on the visible examples."""
    entries = [e for e in mine(history, task_id=task_id, run_id=run_id, prompt=prompt)
               if e.type in config.record]
    if "decision_outcome" in config.record:
        def check(candidate: str) -> VisibleOutcome:
            return outcome if candidate == code else visible_outcome(prompt, entry_point, candidate)

        entries += decision_outcomes(history, task_id=task_id, run_id=run_id, prompt=prompt, check=check)
    if "code_pattern" in config.record:
        pattern = code_pattern(role=author_of(history), task_id=task_id, run_id=run_id, prompt=prompt,
                               entry_point=entry_point, code=code, outcome=outcome)
        entries += [pattern] if pattern is not None else []
    return entries


class WithMemory:
    """``pipeline`` with memory; called like a pipeline (prompt, entry_point, task_id)."""

    def __init__(self, pipeline: dspy.Module, run: RunMemory) -> None:
        self.pipeline = pipeline
        self.run = run
        self.reflector = new_reflector()

    def __call__(self, *, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        # The runner solves a task again only when its checkpoint is missing; memory an
        # interrupted attempt wrote is taken back first, or it would be stored twice.
        self.run.bank.forget_attempt(self.run.run_id, task_id)
        task = TaskMemory(self.run, task_id, prompt, entry_point)
        with using_task_memory(task):
            prediction = self.pipeline(prompt=prompt, entry_point=entry_point, task_id=task_id)
        pool = current_pool()
        thread_id = prediction.outcome.thread_id
        history = pool.history(thread_id=thread_id) if thread_id else []
        outcome = visible_outcome(prompt, entry_point, prediction.code)
        config, bank, written = self.run.config, self.run.bank, []
        if config.reflect:
            entry, step = reflect(self.reflector, task_id=task_id, run_id=self.run.run_id, prompt=prompt,
                                  code=prediction.code, outcome=outcome, history=history)
            if entry is not None:
                written.append(bank.write(entry, config, run_ids=self.run.run_ids))
            if thread_id:
                pool.publish(Message(
                    task_id=task_id, thread_id=thread_id, intent=Intent.REFLECTION,
                    sender=f"reflector@{thread_id[:12]}", summary="reflection after the task",
                    content=entry.content if entry else step.raw, run_id=self.run.run_id,
                    metadata={"trace": step.trace(), "memory_entry_ids": [entry.id] if entry else []},
                ))
        for entry in recorded(config, history, task_id=task_id, run_id=self.run.run_id, prompt=prompt,
                              entry_point=entry_point, code=prediction.code, outcome=outcome):
            written.append(bank.write(entry, config, run_ids=self.run.run_ids))
        demo = verified_demo(role=author_of(history), task_id=task_id, run_id=self.run.run_id, prompt=prompt,
                             entry_point=entry_point, code=prediction.code, outcome=outcome) \
            if config.demos else None
        if demo is not None:  # an example, not a lesson: no proposals, no promotion to a skill
            written.append(Written(bank.episodic.add(demo)))
        skill_ids = sorted({s for i in task.injections for s in i.skill_ids})
        if skill_ids and outcome.passed is not None:
            bank.skills.record_use(skill_ids, succeeded=outcome.passed, run_id=self.run.run_id,
                                    task_id=task_id)
        metrics: dict[str, Any] = {
            **injection_figures(history, task.injections, prompt),
            "memory_entries_written": len(written),
            "memory_skills_promoted": sum(w.skill is not None for w in written),
        }
        if outcome.passed is not None:  # unknown when the prompt shows no runnable example
            metrics["memory_visible_passed"] = outcome.passed
        return dspy.Prediction(
            code=prediction.code, outcome=with_memory_figures(prediction.outcome, **metrics)
        )
