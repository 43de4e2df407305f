"""The agents of CAMEL role-play — task specifier, instructor, assistant — and detectors for the
failure modes the CAMEL paper names: role flipping, repeated instructions, turns without
progress. The instructor's agent drives the conversation and stops it on any of them."""

from __future__ import annotations

import re
from typing import Any

import dspy

from critiquelab.eval.assembly import contains_code
from critiquelab.eval.visible_examples import code_feedback, visible_examples
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role

# Stop reasons besides "done" (the instructor says so) and "max_turns".
ROLE_FLIP, REPEATED_INSTRUCTION, NO_PROGRESS = "role_flip", "repeated_instruction", "no_progress"


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def instructor_flipped(instruction: str, entry_point: str) -> bool:
    """The instructor wrote code instead of an instruction: a fenced block, or a definition or
    return statement of its own."""
    if "```" in instruction:
        return True
    return bool(re.search(rf"^\s*(def\s+{re.escape(entry_point)}\s*\(|return\s)", instruction, re.MULTILINE))


def assistant_flipped(reply_code: str) -> bool:
    """The assistant answered without code (prose: instructions or questions back)."""
    return not contains_code(reply_code)


def repeated(instruction: str, earlier: list[str]) -> bool:
    """The instruction was given before (ignoring case and spacing)."""
    return _normalised(instruction) in {_normalised(e) for e in earlier}


def no_progress(code: str, previous: str | None) -> bool:
    """The assistant returned the same code as last turn (ignoring spacing)."""
    return previous is not None and _normalised(code) == _normalised(previous)


class TaskSpecifierAgent(Agent):
    """Makes the task specific (from the prompt alone) and tells both roles."""

    role = "task_specifier"

    def __init__(self, ctx: TaskContext, specifier: dspy.Module) -> None:
        super().__init__(ctx)
        self.specifier = specifier
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def handle(self, message: Message) -> None:
        step = call_role(self.specifier, self.role, prompt=self.ctx.prompt)
        self.ctx.publish(
            intent=Intent.TASK_SPECIFIED, sender=self.name, summary="task specified", in_reply_to=message.id,
            content=step.specified_task or step.raw or self.ctx.prompt, step=step,
        )


class InstructorAgent(Agent):
    """Gives one instruction per turn; reads each answer; ends the conversation when it says
    the task is done, at ``max_turns`` answers, or on the first failure mode detected — the
    ``status`` message says which (``stop_reason``)."""

    role = "instructor"

    def __init__(
        self, ctx: TaskContext, instructor: dspy.Module, *, max_turns: int, run_examples: bool,
        timeout_s: float,
    ) -> None:
        super().__init__(ctx)
        self.instructor, self.max_turns = instructor, max_turns
        self.examples = visible_examples(ctx.prompt, ctx.entry_point) if run_examples else []
        self.run_examples, self.timeout_s = run_examples, timeout_s
        self.task = ""
        self.instructions: list[str] = []
        self.code: str | None = None
        self.listen([Intent.TASK_SPECIFIED])
        self.listen([Intent.ANSWER], to_me_only=True)

    def _stop(self, reason: str, message: Message, **metadata: Any) -> None:
        self.ctx.publish(
            intent=Intent.STATUS, sender=self.name, summary=f"stopped: {reason}", in_reply_to=message.id,
            stop_reason=reason, **metadata,
        )

    def _feedback(self) -> str:
        if not self.run_examples or self.code is None:
            return "none"
        return code_feedback(
            self.ctx.prompt, self.code, self.ctx.entry_point, self.examples, timeout_s=self.timeout_s
        ).report

    def handle(self, message: Message) -> None:
        if message.intent == Intent.TASK_SPECIFIED:
            self.task = message.content
        else:
            if message.metadata["assistant_flipped"]:
                self._stop(ROLE_FLIP, message, flipped="assistant")
                return
            if no_progress(message.content, self.code):
                self._stop(NO_PROGRESS, message)
                return
            self.code = message.content
            if len(self.instructions) >= self.max_turns:
                self._stop("max_turns", message)
                return
        conversation = "\n".join(f"{i}. {text}" for i, text in enumerate(self.instructions, start=1))
        step = call_role(
            self.instructor, self.role, prompt=self.ctx.prompt, specified_task=self.task,
            conversation=conversation or "none", current_code=self.code or "none",
            execution_feedback=self._feedback(),
        )
        instruction = str(step.instruction or step.raw or "").strip()
        if step.parsed and step.task_done and self.code is not None:
            self._stop("done", message, step=step)
        elif instructor_flipped(instruction, self.ctx.entry_point):
            self._stop(ROLE_FLIP, message, step=step, flipped="instructor")
        elif repeated(instruction, self.instructions):
            self._stop(REPEATED_INSTRUCTION, message, step=step)
        else:
            self.instructions.append(instruction)
            self.ctx.publish(
                intent=Intent.INSTRUCTION, sender=self.name, recipient=self.ctx.agent_name("assistant"),
                content=instruction, summary=f"instruction {len(self.instructions)}", in_reply_to=message.id,
                step=step, turn=len(self.instructions),
            )


class AssistantAgent(Agent):
    """Carries out each instruction, answering with the whole updated function."""

    role = "assistant"

    def __init__(self, ctx: TaskContext, assistant: dspy.Module) -> None:
        super().__init__(ctx)
        self.assistant = assistant
        self.task, self.code = "", "none"
        self.listen([Intent.TASK_SPECIFIED])
        self.listen([Intent.INSTRUCTION], to_me_only=True)

    def handle(self, message: Message) -> None:
        if message.intent == Intent.TASK_SPECIFIED:
            self.task = message.content
            return
        step = call_role(
            self.assistant, self.role, prompt=self.ctx.prompt, specified_task=self.task,
            instruction=message.content, current_code=self.code,
        )
        reply = step.solution_code or step.raw
        flipped = assistant_flipped(reply)
        if not flipped:
            self.code = reply
        self.ctx.publish(
            intent=Intent.ANSWER, sender=self.name, recipient=self.ctx.agent_name("instructor"),
            content=reply, summary=f"answer {message.metadata['turn']}", in_reply_to=message.id, step=step,
            turn=message.metadata["turn"], assistant_flipped=flipped,
        )
