"""Whether two versions of a program are the same program, formatting aside.

A reviser that returns its input with new comments, blank lines or another indentation width has
changed nothing the tests can see: failure attribution calls that an echo, not a failed repair.
"""

from __future__ import annotations

import ast
import re

from critiquelab.eval import python_ast

_COMMENT = re.compile(r"#[^\n]*")


def _normal_form(code: str) -> str:
    """The program's syntax tree (comments, spacing and layout gone), or — for code that does not
    parse — its text without comments and whitespace."""
    try:
        return "ast:" + ast.dump(python_ast.parse(code.strip()))
    except (SyntaxError, ValueError):
        return "text:" + "".join(_COMMENT.sub("", code).split())


def same_program(a: str, b: str) -> bool:
    """``a`` and ``b`` are one program: equal syntax trees, or — when neither parses — equal text
    once comments and whitespace are dropped."""
    return _normal_form(a) == _normal_form(b)
