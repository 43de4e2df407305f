"""What a role call receives from memory, without the call knowing about memory.

:func:`critiquelab.runtime.role_call.call_role` asks :func:`recalled` about each call; the memory subsystem
installs its recaller around each task it serves
(:func:`critiquelab.runtime.memory.injection.using_task_memory`). With nothing installed — a pipeline used
outside a memory run — or for a role memory does not serve, the answer is None and the call goes exactly as
without memory.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from dspy.signatures.signature import Signature

NO_MEMORIES = "none"


@dataclass(frozen=True)
class Recall:
    """What memory gives one role call."""

    # The `memories` text; None: this call gets nothing (recall on failure, a first attempt) and
    # is sent as without memory — the field memory added is left out of it.
    memories: str | None
    # Verified demonstrations, keyed by the signature's field names: DSPy demos for this call.
    demos: tuple[dict[str, str], ...] = ()
    ids: tuple[str, ...] = ()  # the entries, skills and demos given, for the call's trace


Recaller = Callable[[type[Signature], str, Mapping[str, object], "bool | None"], "Recall | None"]
"""``recaller(signature, role, inputs, after_failure)``: what one call of ``role`` (a predictor
with ``signature``) gets; ``after_failure`` is True for a retry after the visible examples failed,
False for a first attempt, None when the caller does not say (the recaller decides from ``inputs``)."""

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


def recalled(
    signature: type[Signature], role: str, inputs: Mapping[str, object], after_failure: bool | None = None
) -> Recall | None:
    """What the installed recaller gives a call of ``role`` with ``inputs`` (None: nothing, and the
    call is not memory's)."""
    recaller = _RECALLER.get()
    return None if recaller is None else recaller(signature, role, inputs, after_failure)
