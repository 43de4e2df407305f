"""reflexion: attempt → results on the visible examples → reflection → retry with the reflections.

After Reflexion (Shinn et al., 2023): a coder attempts the task, an executor runs the attempt on
the examples visible in the prompt (never the hidden tests), and while some fail a reflector
says what went wrong and the lesson; the coder retries with every reflection so far in its
``memories`` field. With ``memory`` on, each attempt also receives what memory recalls (with
``recall: on_failure`` only the retries), and each reflection is kept in episodic memory for later
tasks. As the oracle_feedback control the reflector also reads what the hidden tests say about
the attempt (:mod:`critiquelab.pipelines.controls`).
"""

from __future__ import annotations

from typing import Any

import dspy
from pydantic import Field

from critiquelab.eval.visible_examples import code_feedback, visible_examples
from critiquelab.pipelines.controls import ORACLE_FEEDBACK, ControlArm, oracle_feedback
from critiquelab.pipelines.params import FeedbackTimeout, PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.threads import ThreadOutcome, converse, thread_outcome
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.memory.entries import MemoryEntry, task_tags
from critiquelab.runtime.memory.injection import current_task_memory, recall_for
from critiquelab.runtime.memory.reflection import render_history, task_summary
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.recall import NO_MEMORIES
from critiquelab.runtime.role_call import RoleResult, call_role
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.memory import with_memories
from critiquelab.signatures.reflector import Reflector
from critiquelab.signatures.test_results import with_test_results


class ReflexionParams(PipelineParams):
    """Parameters of ``reflexion``."""

    max_trials: int = Field(default=3, ge=1, le=10, description="Attempts per problem (the first included).")
    feedback_timeout_s: FeedbackTimeout = Field(
        description="Wall-clock limit in seconds for running one attempt on the visible examples.",
    )
    control: ControlArm


class AttemptAgent(Agent):
    """The coder: attempts the task, and again after each reflection, with the reflections so far."""

    role = "coder"

    def __init__(self, ctx: TaskContext, coder: dspy.Module) -> None:
        super().__init__(ctx)
        self.coder = coder
        self.listen([Intent.TASK_ASSIGNMENT, Intent.REFLECTION])

    def handle(self, message: Message) -> None:
        if message.intent == Intent.TASK_ASSIGNMENT and message.recipient not in (None, self.name):
            return
        first = message.intent == Intent.TASK_ASSIGNMENT
        # A retry comes only after the visible examples failed (the reflector's rule below).
        recall = recall_for(self.coder.signature, self.role, {"prompt": self.ctx.prompt}, not first)
        reflections = [m.content for m in self.ctx.history() if m.intent == Intent.REFLECTION]
        own = [f"[this task, attempt {i}] {text}" for i, text in enumerate(reflections, 1)]
        recalled = recall.memories if recall is not None else None
        lines = [line for line in (recalled, *own) if line and line != NO_MEMORIES]
        step = call_role(
            self.coder, self.role, recall=recall, prompt=self.ctx.prompt,
            memories="\n".join(lines) or NO_MEMORIES,
        )
        self.ctx.publish(
            intent=Intent.OUTPUT_COMPLETE if first else Intent.FIX, sender=self.name,
            content=step.code or step.raw,
            summary="first attempt" if first else f"attempt {len(reflections) + 1} after reflection",
            in_reply_to=message.id, step=step,
        )


class VisibleRunAgent(Agent):
    """The executor: runs each attempt on the prompt's visible examples."""

    role = "executor"

    def __init__(self, ctx: TaskContext, timeout_s: float) -> None:
        super().__init__(ctx)
        self.examples = visible_examples(ctx.prompt, ctx.entry_point)  # never the hidden tests
        self.timeout_s = timeout_s
        self.listen([Intent.OUTPUT_COMPLETE, Intent.FIX])

    def handle(self, message: Message) -> None:
        feedback = code_feedback(
            self.ctx.prompt, message.content, self.ctx.entry_point, self.examples, timeout_s=self.timeout_s
        )
        # Code that does not compile is a failing attempt too: its one line is marked FAIL.
        text = feedback.report if feedback.compiles else f"FAIL: {feedback.report}"
        failing = sum(line.startswith("FAIL") for line in text.splitlines())
        self.ctx.publish(
            intent=Intent.EXECUTION_FEEDBACK, sender=self.name, content=text,
            summary=f"visible examples: {failing} failing", in_reply_to=message.id, failing=failing,
        )


class ReflectAgent(Agent):
    """The reflector: after a failing attempt (while trials remain), what went wrong and the
    lesson; as the oracle_feedback control (``oracle``) it also reads the hidden tests' report on
    the attempt (its signature then has the ``test_results`` field). Retries still follow the
    visible examples alone."""

    role = "reflector"

    def __init__(
        self, ctx: TaskContext, reflector: dspy.Module, max_trials: int, *, oracle: bool = False
    ) -> None:
        super().__init__(ctx)
        self.reflector = reflector
        self.max_trials = max_trials
        self.oracle = oracle
        self.listen([Intent.EXECUTION_FEEDBACK])

    def handle(self, message: Message) -> None:
        attempts = sum(m.intent in (Intent.OUTPUT_COMPLETE, Intent.FIX) for m in self.ctx.history())
        if not message.metadata.get("failing"):
            return
        if attempts >= self.max_trials:
            self.ctx.publish(intent=Intent.STATUS, sender=self.name, summary="max_trials reached",
                             in_reply_to=message.id, stop_reason="max_iterations")
            return
        code = self.ctx.pool_message(message.in_reply_to or "").content
        # Only the control adds the field: every other run's request is the same as before.
        control: dict[str, Any] = {"test_results": oracle_feedback(code)} if self.oracle else {}
        step = call_role(
            self.reflector, self.role, prompt=self.ctx.prompt, code=code, outcome=message.content,
            history=render_history(self.ctx.history()), **control,
        )
        lesson = str(step.lesson or "").strip()
        went_wrong = str(step.what_went_wrong or "").strip()
        content = " ".join(part for part in (went_wrong, lesson) if part) or step.raw
        entry_ids = self._remember(lesson, step) if lesson else []
        self.ctx.publish(
            intent=Intent.REFLECTION, sender=self.name, content=content,
            summary=f"reflection on attempt {attempts}",
            in_reply_to=message.id, step=step, memory_entry_ids=entry_ids,
        )

    def _remember(self, lesson: str, step: RoleResult) -> list[str]:
        """With memory on, keep the reflection in episodic memory for later tasks."""
        task = current_task_memory()
        if task is None:
            return []
        pattern = str(step.pattern or "").strip()
        entry = MemoryEntry(
            role="coder", type="reflection", task_id=self.ctx.task_id, run_id=task.run.run_id,
            tags=task_tags(self.ctx.prompt), content=f"{pattern}: {lesson}" if pattern else lesson,
            context={"what_went_wrong": step.what_went_wrong, "visible_passed": False,
                     "task_summary": task_summary(self.ctx.prompt)},
        )
        task.run.bank.write(entry, task.run.config, run_ids=task.run.run_ids)
        return [entry.id]


class ReflexionOutcome(ThreadOutcome):
    """Figures of ``reflexion``: the thread's, and its attempts and reflections."""

    trials: int = Field(description="Attempts made (the first and one per reflection).")
    reflections: int = Field(description="Reflections on a failed attempt.")


@register_pipeline(
    "reflexion", params=ReflexionParams, outcome=ReflexionOutcome, roles=("coder", "reflector")
)
class Reflexion(dspy.Module):
    """Attempt, run on the visible examples, reflect on failures and retry with the reflections
    (up to max_trials); reflections go to episodic memory when memory is on. As the
    oracle_feedback control the reflector also reads the hidden tests' report."""

    def __init__(self, params: ReflexionParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else ReflexionParams.defaults()
        self.coder = dspy.Predict(with_memories(Coder))
        self.oracle = self.params.control == ORACLE_FEEDBACK
        self.reflector = dspy.Predict(with_test_results(Reflector) if self.oracle else Reflector)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        attempt = AttemptAgent(ctx, self.coder)
        agents = [attempt, VisibleRunAgent(ctx, self.params.feedback_timeout_s),
                  ReflectAgent(ctx, self.reflector, self.params.max_trials, oracle=self.oracle)]
        history = converse(ctx, agents, attempt.name)
        found = thread_outcome(history)
        trials = sum(m.intent in (Intent.OUTPUT_COMPLETE, Intent.FIX) for m in history)
        return dspy.Prediction(code=found.final_code, outcome=ReflexionOutcome(
            first_code=found.first_code, iterations=max(1, trials), parsed=found.parsed,
            thread_id=ctx.thread_id, **found.figures, trials=trials,
            reflections=sum(m.intent == Intent.REFLECTION for m in history),
        ))
