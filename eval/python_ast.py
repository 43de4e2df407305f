"""``ast.parse`` and ``ast.literal_eval`` that are safe to call from several threads at once.

CPython 3.11 counts the AST constructor's recursion depth in state that all threads share, so
two threads building ASTs at the same moment can fail with ``SystemError: AST constructor
recursion depth mismatch`` (python/cpython#106905, fixed in later releases). The harness parses
candidate programs from many threads (problems, samples and scoring run concurrently): it broke
a 164-problem run once. Our own calls take turns behind one lock; a library's parse on another
thread can still collide with ours, so the spurious error is also retried.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

_T = TypeVar("_T")
# Process-wide on purpose: the state it guards is the interpreter's, not any object's.
_AST_LOCK = threading.Lock()
_ATTEMPTS = 3


def _serialised(build: Callable[[], _T]) -> _T:
    for attempt in range(_ATTEMPTS):
        try:
            with _AST_LOCK:
                return build()
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


@overload
def parse(source: str, mode: Literal["exec"] = "exec") -> ast.Module: ...
@overload
def parse(source: str, mode: Literal["eval"]) -> ast.Expression: ...
def parse(source: str, mode: Literal["exec", "eval"] = "exec") -> ast.Module | ast.Expression:
    """``ast.parse(source, mode=mode)``; a syntax error raises as usual."""
    if mode == "eval":
        return _serialised(lambda: ast.parse(source, mode="eval"))
    return _serialised(lambda: ast.parse(source, mode="exec"))


def literal_eval(source: str) -> Any:
    """``ast.literal_eval(source)``; a non-literal raises as usual."""
    return _serialised(lambda: ast.literal_eval(source))
