"""Memories into prompts: a role's signature gets the typed ``memories`` input field, and each
call of that role receives the top-k entries and skills recalled for it and the task.

The runner installs a :class:`TaskMemory` around each problem (a ``ContextVar``, like the pool);
while it is installed, :func:`memories_for` is what :func:`pipelines.role_call.call_role` gets
(through :mod:`pipelines.recall`) when a predictor has the field. Every injection is recorded
(entry and skill ids) in the call's trace and on the task, so reuse can be counted.
"""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import dspy

from pipelines.memory.bank import MemoryBank
from pipelines.memory.config import MemoryConfig
from pipelines.memory.episodic import Recalled
from pipelines.memory.skill_ranking import SkillRanker
from pipelines.memory.skills import Skill
from pipelines.recall import NO_MEMORIES, recalling
from signatures.memory import role_of, with_memories

_TASK_MEMORY: contextvars.ContextVar[TaskMemory | None] = contextvars.ContextVar(
    "critiquelab_task_memory", default=None
)


def enable_memory(pipeline: dspy.Module, roles: list[str]) -> list[str]:
    """Give the predictors of ``roles`` the ``memories`` input field; returns the predictor names
    changed. Called once, when the pipeline is built, so DSPy and `export` see the field."""
    changed = []
    for name, predictor in pipeline.named_predictors():
        if role_of(predictor.signature) in roles:
            predictor.signature = with_memories(predictor.signature)
            changed.append(name)
    return changed


@dataclass
class RunMemory:
    """The memory of one pipeline × seed run."""

    bank: MemoryBank
    config: MemoryConfig
    run_id: str
    skill_ranker: SkillRanker = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.skill_ranker = SkillRanker(self.bank.episodic.embed)

    @property
    def run_ids(self) -> list[str] | None:
        """Runs whose entries this run may recall (None: all)."""
        if self.config.scope == "all":
            return None
        return [self.run_id, *([self.config.warm_start] if self.config.warm_start else [])]


@dataclass
class Injection:
    """What one role call received."""

    role: str
    entry_ids: list[str]
    skill_ids: list[str]
    foreign: bool  # an entry written on another task or about another role
    texts: list[str]


@dataclass
class TaskMemory:
    """Memory while one task is solved: recalls for its role calls and records them."""

    run: RunMemory
    task_id: str
    prompt: str
    entry_point: str = ""
    injections: list[Injection] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def recall(self, role: str, query: str) -> tuple[list[Recalled], list[Skill]]:
        """Entries recallable by ``role`` and the skills it may receive (nearest to the task
        first, within ``skills_max_distance``)."""
        config = self.run.config
        entries = self.run.bank.episodic.recall(query, audience=role, k=config.k, run_ids=self.run.run_ids)
        skills = self.run.bank.skills.list(role=role, approved_only=config.approval == "manual")
        ranked = self.run.skill_ranker.rank(query, skills, max_distance=config.skills_max_distance,
                                            k=config.skills_k)
        return entries, [r.skill for r in ranked]

    def inject(self, role: str, query: str) -> tuple[str, list[str]]:
        """The ``memories`` text for one call of ``role`` and the ids it holds."""
        entries, skills = self.recall(role, query)
        injection = Injection(
            role=role, entry_ids=[r.entry.id for r in entries], skill_ids=[s.id for s in skills],
            foreign=any(r.entry.task_id != self.task_id or r.entry.role != role for r in entries),
            texts=[r.entry.content for r in entries] + [s.template for s in skills],
        )
        with self._lock:
            self.injections.append(injection)
        lines = [f"[{r.entry.id}] {r.entry.content}" for r in entries]
        lines += [f"[{s.id}] {s.template}" for s in skills]
        return ("\n".join(lines) or NO_MEMORIES), [*injection.entry_ids, *injection.skill_ids]


@contextmanager
def using_task_memory(task: TaskMemory) -> Iterator[TaskMemory]:
    token = _TASK_MEMORY.set(task)
    try:
        with recalling(memories_for):
            yield task
    finally:
        _TASK_MEMORY.reset(token)


def current_task_memory() -> TaskMemory | None:
    return _TASK_MEMORY.get()


def memories_for(role: str, inputs: Mapping[str, object]) -> tuple[str, list[str]]:
    """The ``memories`` input of a call of ``role`` (queried by the task prompt), and its ids;
    ``none`` when no task memory is active (a pipeline used outside a memory run)."""
    task = current_task_memory()
    if task is None:
        return NO_MEMORIES, []
    return task.inject(role, str(inputs.get("prompt") or task.prompt))


_WORD = re.compile(r"[a-z_]{5,}")


def used_memory(output: str, injected: list[str], prompt: str) -> bool:
    """Whether ``output`` measurably used an injected text: it shares at least two distinctive
    words (five letters or more, absent from the prompt) with one of them."""
    said = set(_WORD.findall(output.lower())) - set(_WORD.findall(prompt.lower()))
    return any(len(said & set(_WORD.findall(text.lower()))) >= 2 for text in injected)
