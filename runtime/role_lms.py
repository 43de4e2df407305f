"""Per-role language models: the LM (model and sampling settings) each role of a pipeline calls.

An experiment may give a role its own model or temperature (a sampled repairer, a larger model as
critic). The runner binds them for the problem being solved with :func:`using_role_lms`;
:func:`critiquelab.runtime.role_call.call_role` asks :func:`role_lm` for the role it is calling and falls
back to the context's LM. A context variable, not pipeline state: the pipeline object is shared
by the problems solved concurrently, and parallel agents copy the context they were started in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

import dspy

_role_lms: ContextVar[Mapping[str, dspy.BaseLM] | None] = ContextVar("critiquelab_role_lms", default=None)


def role_lm(role: str) -> dspy.BaseLM | None:
    """The LM bound to ``role``, or None: the role uses the context's LM."""
    return (_role_lms.get() or {}).get(role)


@contextlib.contextmanager
def using_role_lms(lms: Mapping[str, dspy.BaseLM]) -> Iterator[None]:
    """Role calls inside this block use ``lms[role]`` where given."""
    token = _role_lms.set(dict(lms))
    try:
        yield
    finally:
        _role_lms.reset(token)
