"""Two agents of one role in one task would share one pool queue, each taking the other's
messages: the second to listen is refused with one line naming the role and what to do."""

import pytest

from critiquelab.core.errors import UserError
from critiquelab.runtime.agents import Agent, TaskContext
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent


class Reviewer(Agent):
    role = "reviewer"

    def __init__(self, ctx, index=None):
        super().__init__(ctx)
        if index is not None:  # the way out the error names: a name of its own
            self.name = ctx.agent_name(f"reviewer{index}")
        self.seen = []
        self.listen([Intent.OUTPUT_COMPLETE])

    def handle(self, message):
        self.seen.append(message.id)


def test_a_second_agent_under_a_taken_name_is_refused():
    ctx = TaskContext(MessagePool(), "t/1", "prompt", "f")
    Reviewer(ctx)
    with pytest.raises(UserError) as refused:
        Reviewer(ctx)
    message = str(refused.value)
    assert "\n" not in message
    assert "two agents listen under the pool name 'reviewer' (Reviewer and Reviewer) in one task" in message
    assert "ctx.agent_name(f'reviewer{index}')" in message


def test_named_apart_or_one_after_the_other_they_each_get_their_messages():
    ctx = TaskContext(MessagePool(), "t/1", "prompt", "f")
    first, second = Reviewer(ctx, 0), Reviewer(ctx, 1)
    ctx.publish(intent=Intent.OUTPUT_COMPLETE, sender=ctx.agent_name("coder"), content="x")
    for agent in (first, second):
        for message in ctx.pool.take(agent.name):
            agent.handle(message)
    assert len(first.seen) == len(second.seen) == 1  # one copy each, none taken by the other
    first.close()
    Reviewer(ctx, 0)  # its name is free again once it closed
    other_task = TaskContext(ctx.pool, "t/2", "prompt", "f")
    Reviewer(other_task, 1)  # another task's thread: another name
