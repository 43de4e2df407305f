"""Verified demonstrations: earlier tasks' prompt → final code, recalled as DSPy demos.

ExpeL and DSPy's KNNFewShot help small models with examples rather than prose: a task solved
earlier, shown in the signature's own few-shot turns. Here a task leaves a ``demo`` entry when its
final code passed every example its prompt shows — the only outcome a run may know; hidden tests
are never asked, so none labels a demo and none can appear in one (a demo holds the earlier
prompt and the model's own code). The code is kept as :mod:`.code_patterns` keeps it: the entry
point and what it reaches, without docstrings (the demo's prompt already has the docstring, and
stray tests or prints must not be imitated), within ``MAX_CODE_CHARS``.

The entry's document is the task's prompt, so recall compares prompt with prompt (KNNFewShot's
"nearest inputs"). ``nearest`` takes the closest demos of earlier tasks within
``demos_max_distance``; ``random`` — the control — draws as many from every earlier task's demos,
seeded by the task and role, so a rerun sends the same requests. A task never gets its own demo
(a resumed task that had been half done must not see its own answer).
"""

from __future__ import annotations

import random

from dspy.signatures.signature import Signature

from critiquelab.runtime.memory.code_patterns import MAX_CODE_CHARS, solution_code
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.memory.entries import MemoryEntry, task_tags
from critiquelab.runtime.memory.episodic import EpisodicStore
from critiquelab.runtime.memory.reflection import VisibleOutcome, task_summary
from critiquelab.runtime.recall import NO_MEMORIES
from critiquelab.signatures.adapter import is_code_signature
from critiquelab.signatures.memory import MEMORIES_FIELD

DEMO = "demo"
MAX_PROMPT_CHARS = 2000  # a longer prompt would crowd a small model's context as an example


def verified_demo(
    *, role: str, task_id: str, run_id: str, prompt: str, entry_point: str, code: str,
    outcome: VisibleOutcome,
) -> MemoryEntry | None:
    """The demo of a finished task, or None when its final ``code`` did not pass every visible
    example (or none could be run), does not parse, or it or the prompt is too long."""
    if outcome.passed is not True or len(prompt) > MAX_PROMPT_CHARS:
        return None
    kept = (solution_code(code, entry_point or None) or "").strip()
    if not kept or len(kept) > MAX_CODE_CHARS:
        return None
    return MemoryEntry(
        role=role, type=DEMO, task_id=task_id, run_id=run_id, tags=task_tags(prompt), content=prompt,
        audience=[role],
        context={"code": kept, "entry_point": entry_point, "visible_passed": True,
                 "task_summary": task_summary(prompt)},
    )


def takes_demos(signature: type[Signature]) -> bool:
    """Whether a role's signature can take a verified demo: it writes code, from a prompt."""
    return is_code_signature(signature) and "prompt" in signature.input_fields


def as_demo(signature: type[Signature], entry: MemoryEntry) -> dict[str, str]:
    """``entry`` in ``signature``'s fields: its prompt and code as the role's output. A role with
    more inputs than the prompt (a fixer's code and review) gets DSPy's incomplete demo, whose
    missing fields the adapter marks as not supplied."""
    (output,) = signature.output_fields
    demo = {"prompt": entry.content, output: str(entry.context["code"])}
    if MEMORIES_FIELD in signature.input_fields:
        demo[MEMORIES_FIELD] = NO_MEMORIES  # the demo's own call had nothing recalled
    return demo


def select_demos(
    store: EpisodicStore, config: MemoryConfig, query: str, *, task_id: str, role: str,
    run_ids: list[str] | None,
) -> list[MemoryEntry]:
    """The demos one call of ``role`` on ``task_id`` gets (see the module's docstring)."""
    nearest = store.recall(
        query, type=DEMO, k=config.demos, run_ids=run_ids, not_task=task_id,
        max_distance=config.demos_max_distance, touch=config.demo_selection == "nearest",
    )
    if config.demo_selection == "nearest" or not nearest:
        return [r.entry for r in nearest]
    earlier = [e for e in store.all(include_deprecated=False)
               if e.type == DEMO and e.task_id != task_id and (run_ids is None or e.run_id in run_ids)]
    chosen = random.Random(f"{task_id}:{role}").sample(earlier, len(nearest))
    store.touch(chosen)
    return chosen
