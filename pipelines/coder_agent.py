"""The drafting agent several pipelines start with (baseline, self-refine, critic loop): it answers
a task assignment with a first implementation."""

from __future__ import annotations

import dspy

from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import call_role


class CoderAgent(Agent):
    """Answers a task assignment with a first implementation."""

    role = "coder"

    def __init__(self, ctx: TaskContext, coder: dspy.Module) -> None:
        super().__init__(ctx)
        self.coder = coder
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    def handle(self, message: Message) -> None:
        step = call_role(self.coder, self.role, prompt=self.ctx.prompt)
        self.ctx.publish(
            intent=Intent.OUTPUT_COMPLETE, sender=self.name, content=step.code or step.raw,
            summary="first implementation", in_reply_to=message.id, step=step,
        )
