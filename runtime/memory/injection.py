"""Memory into role calls: recalled entries and skills as text in a typed ``memories`` input
field, verified demos as DSPy demos — at every call, or only after the visible examples failed.

The runner installs a :class:`TaskMemory` around each problem (a ``ContextVar``, like the pool);
while it is installed, :func:`recall_for` is what :func:`critiquelab.runtime.role_call.call_role` asks
(through :mod:`critiquelab.runtime.recall`) about each call of a memory role: the roles in the config's
``roles``, and a role whose signature takes memories of its own (reflexion's coder). Every call
asked about is recorded (entry, skill and demo ids, whether it was a first attempt) in the call's
trace and on the task, so reuse can be counted.

With ``recall: on_failure`` a first attempt gets nothing and goes exactly as without memory. A
call is a retry after a failure when its caller says so (reflexion's retry) or, when the caller
does not say, when the code it is given to revise (its ``code`` input: a fixer's, a repairer's)
fails one of the prompt's visible examples; everything else is a first attempt.
"""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import dspy
from dspy.signatures.signature import Signature

from critiquelab.runtime.memory.bank import MemoryBank
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.memory.demos import DEMO, as_demo, select_demos, takes_demos
from critiquelab.runtime.memory.episodic import Recalled
from critiquelab.runtime.memory.reflection import visible_outcome
from critiquelab.runtime.memory.skill_ranking import SkillRanker
from critiquelab.runtime.memory.skills import Skill
from critiquelab.runtime.recall import NO_MEMORIES, Recall, recalling
from critiquelab.signatures.memory import has_memories, role_of, with_memories

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

    def scoped(self, skills: list[Skill]) -> list[Skill]:
        """The ``skills`` this run may receive: with ``scope: run``, those promoted from entries of
        its runs alone. Skills live in the store, not in a run; without this a skill one ordering
        (or another pipeline of the experiment) promoted — a solved task's code among them —
        would reach this run, and the runs would no longer be independent."""
        runs = self.run_ids
        if runs is None:
            return skills
        wrote = self.bank.episodic.runs_of([i for skill in skills for i in skill.source_entry_ids])
        return [s for s in skills if all(wrote.get(i) in runs for i in s.source_entry_ids)]


@dataclass
class Injection:
    """What one role call memory was asked about received."""

    role: str
    entry_ids: list[str]
    skill_ids: list[str]
    foreign: bool  # an entry or demo written on another task, or an entry about another role
    texts: list[str]
    demo_ids: list[str] = field(default_factory=list)
    first_attempt: bool = True  # not a retry or repair after the visible examples failed

    @property
    def ids(self) -> list[str]:
        return [*self.entry_ids, *self.skill_ids, *self.demo_ids]


@dataclass
class TaskMemory:
    """Memory while one task is solved: recalls for its role calls and records them."""

    run: RunMemory
    task_id: str
    prompt: str
    entry_point: str = ""
    injections: list[Injection] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _failing: dict[str, bool] = field(default_factory=dict, repr=False)  # code -> fails a visible example

    def recall(self, role: str, query: str) -> tuple[list[Recalled], list[Skill]]:
        """Entries recallable by ``role`` (within ``max_distance`` of the query) and the skills it
        may receive (nearest to the task first, within ``skills_max_distance``)."""
        config = self.run.config
        entries = self.run.bank.episodic.recall(
            query, audience=role, k=config.k, run_ids=self.run.run_ids, max_distance=config.max_distance,
            exclude_types=(DEMO,),
        )
        listed = self.run.bank.skills.list(role=role, approved_only=config.approval == "manual")
        skills = self.run.scoped(listed)
        ranked = self.run.skill_ranker.rank(query, skills, max_distance=config.skills_max_distance,
                                            k=config.skills_k)
        return entries, [r.skill for r in ranked]

    def after_failure(self, inputs: Mapping[str, object]) -> bool:
        """Whether a call is a repair of code failing a visible example (its ``code`` input); a
        call without code to revise is a first attempt."""
        code = inputs.get("code")
        if not isinstance(code, str) or not code.strip():
            return False
        with self._lock:
            known = self._failing.get(code)
        if known is None:  # unknown when the prompt shows no runnable example: nothing failed
            known = visible_outcome(self.prompt, self.entry_point, code).passed is False
            with self._lock:
                self._failing[code] = known
        return known

    def recall_call(
        self, signature: type[Signature], role: str, inputs: Mapping[str, object], after_failure: bool | None
    ) -> Recall:
        """What one call of ``role`` gets, recorded as an :class:`Injection`."""
        config = self.run.config
        failed = self.after_failure(inputs) if after_failure is None else after_failure
        if config.recall == "on_failure" and not failed:
            self._record(Injection(role, [], [], False, []))
            return Recall(memories=None)
        query = str(inputs.get("prompt") or self.prompt)
        entries, skills = self.recall(role, query) if config.lessons else ([], [])
        demos = []
        if config.demos and takes_demos(signature):
            demos = select_demos(self.run.bank.episodic, config, query, task_id=self.task_id, role=role,
                                 run_ids=self.run.run_ids)
        foreign = any(r.entry.task_id != self.task_id or r.entry.role != role for r in entries)
        injection = Injection(
            role=role, entry_ids=[r.entry.id for r in entries], skill_ids=[s.id for s in skills],
            foreign=foreign or bool(demos),  # a demo is always another task's
            texts=[r.entry.content for r in entries] + [s.template for s in skills]
            + [str(d.context["code"]) for d in demos],
            demo_ids=[d.id for d in demos], first_attempt=not failed,
        )
        self._record(injection)
        lines = [f"[{r.entry.id}] {r.entry.content}" for r in entries]
        lines += [f"[{s.id}] {s.template}" for s in skills]
        return Recall("\n".join(lines) or NO_MEMORIES, tuple(as_demo(signature, d) for d in demos),
                      tuple(injection.ids))

    def _record(self, injection: Injection) -> None:
        with self._lock:
            self.injections.append(injection)


@contextmanager
def using_task_memory(task: TaskMemory) -> Iterator[TaskMemory]:
    token = _TASK_MEMORY.set(task)
    try:
        with recalling(recall_for):
            yield task
    finally:
        _TASK_MEMORY.reset(token)


def current_task_memory() -> TaskMemory | None:
    return _TASK_MEMORY.get()


def recall_for(
    signature: type[Signature], role: str, inputs: Mapping[str, object], after_failure: bool | None = None
) -> Recall | None:
    """What a call of ``role`` (a predictor with ``signature``) gets from the task's memory; None
    when no task memory is active (a pipeline used outside a memory run) or the role is not
    memory's (see the module's docstring for ``after_failure``)."""
    task = current_task_memory()
    if task is None or not (has_memories(signature) or role_of(signature) in task.run.config.roles):
        return None
    return task.recall_call(signature, role, inputs, after_failure)


_WORD = re.compile(r"[a-z_]{5,}")


def used_memory(output: str, injected: list[str], prompt: str) -> bool:
    """Whether ``output`` measurably used an injected text: it shares at least two distinctive
    words (five letters or more, absent from the prompt) with one of them."""
    said = set(_WORD.findall(output.lower())) - set(_WORD.findall(prompt.lower()))
    return any(len(said & set(_WORD.findall(text.lower()))) >= 2 for text in injected)
