"""Where a role call's ``memories`` input comes from, without the call knowing about memory.

:func:`pipelines.role_call.call_role` asks :func:`recalled` for a predictor that has the
``memories`` field; the memory subsystem installs its recaller around each task it serves
(:func:`pipelines.memory.injection.using_task_memory`). With nothing installed — a pipeline used
outside a memory run — the field says ``none``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

NO_MEMORIES = "none"

Recaller = Callable[[str, Mapping[str, object]], tuple[str, list[str]]]
"""``recaller(role, inputs)``: the ``memories`` text for one call of ``role`` and the ids it holds."""

_RECALLER: contextvars.ContextVar[Recaller | None] = contextvars.ContextVar(
    "critiquelab_recaller", default=None
)


@contextmanager
def recalling(recaller: Recaller) -> Iterator[None]:
    token = _RECALLER.set(recaller)
    try:
        yield
    finally:
        _RECALLER.reset(token)


def recalled(role: str, inputs: Mapping[str, object]) -> tuple[str, list[str]]:
    """What the installed recaller gives a call of ``role`` with ``inputs``."""
    recaller = _RECALLER.get()
    return (NO_MEMORIES, []) if recaller is None else recaller(role, inputs)
