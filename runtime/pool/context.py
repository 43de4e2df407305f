"""How a pipeline finds its message pool without a module-level global.

The runner decides which pool a run uses (persistent, tagged with the run); pipelines are
``dspy.Module``s that DSPy may also call on its own (compilation, evaluation). A ``ContextVar``
lets the runner install the pool around each call while a pipeline used standalone still works:
``current_pool()`` falls back to a fresh in-memory pool.

Threads: a ``ContextVar`` does **not** propagate into new threads (``threading.Thread``,
``ThreadPoolExecutor.submit``). The runner must set the pool inside each worker, e.g.
``executor.submit(bind_pool(pool, solve), pipeline, problem)``, or submit through
``contextvars.copy_context().run``. asyncio tasks do inherit the context they were created in.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from critiquelab.runtime.pool.message_pool import MessagePool

P = ParamSpec("P")
R = TypeVar("R")

_ACTIVE_POOL: contextvars.ContextVar[MessagePool | None] = contextvars.ContextVar(
    "critiquelab_message_pool", default=None
)
# The experiment run (MLflow child run) messages published in this context belong to.
_RUN_ID: contextvars.ContextVar[str] = contextvars.ContextVar("critiquelab_run_id", default="")


@contextmanager
def using_pool(pool: MessagePool, *, run_id: str = "") -> Iterator[MessagePool]:
    """Make ``pool`` the one ``current_pool()`` returns in this context (nests; restored on exit),
    and stamp messages published through pipelines with ``run_id``."""
    token = _ACTIVE_POOL.set(pool)
    run_token = _RUN_ID.set(run_id)
    try:
        yield pool
    finally:
        _RUN_ID.reset(run_token)
        _ACTIVE_POOL.reset(token)


def current_run_id() -> str:
    return _RUN_ID.get()


def current_pool() -> MessagePool:
    """The active pool, or a new in-memory one when none is active.

    The fallback is *fresh on every call* (nothing hidden is kept between calls), so a pipeline
    should call this once per ``forward`` and pass the pool on, not call it per message.
    """
    pool = _ACTIVE_POOL.get()
    return pool if pool is not None else MessagePool()


def bind_pool(pool: MessagePool, fn: Callable[P, R], *, run_id: str = "") -> Callable[P, R]:
    """``fn`` wrapped to run with ``pool`` active: for submitting to worker threads."""

    @functools.wraps(fn)
    def bound(*args: P.args, **kwargs: P.kwargs) -> R:
        with using_pool(pool, run_id=run_id):
            return fn(*args, **kwargs)

    return bound
