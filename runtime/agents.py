"""Agents: named participants that react to pool messages by calling a role and publishing
the result. Agents never call each other; a pipeline is agents reacting to messages."""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from critiquelab.core.errors import UserError
from critiquelab.runtime.agent_traces import AgentTraces
from critiquelab.runtime.pool.context import current_run_id
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult


@dataclass
class TaskContext:
    """One pipeline run on one task: the thread all its agents talk in."""

    pool: MessagePool
    task_id: str
    prompt: str
    entry_point: str
    thread_id: str = ""  # default: a fresh id minted by the pool
    run_id: str = field(default_factory=current_run_id)
    # Every message of this thread passes through publish(), so the thread's history is kept
    # here too: reading it back from a persisted pool would cost a store query per step.
    _log: list[Message] = field(default_factory=list, repr=False)
    # Agents of one thread may publish from several threads (parallel agents): the log must keep
    # the pool's order, so stamping and appending happen together.
    _publishing: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Pool name -> the agent listening under it: two agents under one name would share one queue,
    # each taking the other's messages, so the second is refused (see claim).
    _listeners: dict[str, object] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.thread_id:
            self.thread_id = self.pool.new_thread_id()

    def agent_name(self, role: str) -> str:
        # Agent names are unique per thread, so concurrent tasks never share a queue.
        return f"{role}@{self.thread_id[:12]}"

    def claim(self, name: str, agent: object) -> None:
        """Record ``agent`` as the one listening under pool name ``name``; another agent already
        listening there (two agents of one role, neither given a name of its own) is refused
        with one line, as a pipeline's mistake, instead of their queues silently merging."""
        with self._publishing:
            holder = self._listeners.setdefault(name, agent)
        if holder is not agent:
            role = agent_role(name)
            raise UserError(
                f"two agents listen under the pool name '{role}' ({type(holder).__name__} and "
                f"{type(agent).__name__}) in one task: give each its own name, e.g. "
                f"self.name = ctx.agent_name(f'{role}{{index}}') after Agent.__init__")

    def release(self, name: str, agent: object) -> None:
        with self._publishing:
            if self._listeners.get(name) is agent:
                del self._listeners[name]

    def publish(
        self, *, intent: Intent, sender: str, content: str = "", summary: str = "",
        recipient: str | None = None, in_reply_to: str | None = None,
        step: RoleResult | None = None, **metadata: Any,
    ) -> Message:
        if step is not None:
            metadata["trace"] = step.trace()
        unstamped = Message(
            task_id=self.task_id, thread_id=self.thread_id, intent=intent, sender=sender,
            recipient=recipient, summary=summary, content=content, in_reply_to=in_reply_to,
            run_id=self.run_id, metadata=metadata,
        )
        with self._publishing:
            message = self.pool.publish(unstamped)
            self._log.append(message)
        return message

    def history(self) -> list[Message]:
        with self._publishing:
            return list(self._log)

    def pool_message(self, message_id: str) -> Message:
        return next(m for m in self.history() if m.id == message_id)

    def latest_feedback(self) -> str:
        feedback = [m for m in self.history() if m.intent == Intent.EXECUTION_FEEDBACK]
        return feedback[-1].content if feedback else "none"

    def assign(self, recipient: str | None) -> Message:
        """Publish the task; ``recipient=None`` broadcasts it (several agents start at once)."""
        return self.publish(
            intent=Intent.TASK_ASSIGNMENT, sender=self.agent_name("orchestrator"),
            recipient=recipient, content=self.prompt, summary=f"solve {self.task_id}",
            entry_point=self.entry_point,
        )



def agent_role(name: str) -> str:
    """The role an agent's name was made from (:meth:`TaskContext.agent_name`): ``critic@0123abcd4567``
    → ``critic``."""
    return name.split("@", 1)[0]


class Agent(abc.ABC):
    """Base class: subscribe in ``__init__`` and implement :meth:`handle`."""

    role = "agent"

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.name = ctx.agent_name(self.role)

    def listen(self, intents: Iterable[Intent], *, to_me_only: bool = False) -> None:
        self.ctx.claim(self.name, self)
        self.ctx.pool.subscribe(
            self.name, intents=list(intents), thread_id=self.ctx.thread_id, to_me_only=to_me_only
        )

    @abc.abstractmethod
    def handle(self, message: Message) -> None:
        """React to one delivered message (usually: call a role, publish the result)."""

    def close(self) -> None:
        self.ctx.pool.unsubscribe(self.name)
        self.ctx.release(self.name, self)


# A guard against agents that would answer each other forever; no pipeline comes near it.
MAX_ROUNDS = 1000


def run_until_quiet(agents: Sequence[Agent], max_rounds: int = MAX_ROUNDS) -> int:
    """Deliver messages until no agent has anything pending. Returns the rounds used.

    Each round, every agent takes the batch waiting in its queue and reacts to it in order. The
    agents' role calls join DSPy's trace as :class:`AgentTraces` orders them, as when they run
    at once.
    """
    traces = AgentTraces(len(agents))
    rounds = 0
    while rounds < max_rounds:
        delivered = False
        for index, agent in enumerate(agents):
            with traces.recording(index):
                for message in agent.ctx.pool.take(agent.name):
                    delivered = True
                    agent.handle(message)
        if not delivered:
            break
        rounds += 1
    traces.join()
    return rounds


def sampling_config(index: int, temperature: float) -> dict[str, float | int]:
    """LM settings for the ``index``-th independent sample of a call: its own seed (derived from
    the run's seed, so runs stay reproducible) and rollout id (so the cache keeps them apart)."""
    lm = dspy.settings.lm
    base = int(lm.kwargs.get("seed") or 0) if lm is not None else 0
    return {"temperature": temperature, "seed": base * 1000 + index, "rollout_id": index}


def code_messages(history: Sequence[Message]) -> list[Message]:
    """Messages that carry a version of the code, oldest first."""
    return [m for m in history if m.intent in (Intent.OUTPUT_COMPLETE, Intent.FIX)]
