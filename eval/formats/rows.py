"""Read one dataset row's fields with their types checked, failing with one line that names
the dataset, the row, its task id and the field.

Why every field is checked up front: a row whose ``prompt`` is a number, or whose ``test`` is
empty, used to be accepted and then ran every problem to a failure or ``error/test_setup`` —
a wrong result with exit code 0. A bad row must stop the run before anything runs.
"""

from __future__ import annotations

import ast
import keyword
import math
from collections.abc import Mapping
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.eval import python_ast

# A task id names a problem in every table, page title, checkpoint and MLflow trace (whose name
# MLflow caps at 4,096 characters); real ones are short ("HumanEval/0", "Mbpp/2", 601).
MAX_TASK_ID = 200


class RowReader:
    """One raw row of a dataset, read through the format's field -> column mapping.

    ``position`` is 1-based: the n-th row of the file (for JSON Lines, the n-th non-blank line).
    """

    def __init__(self, source: str, position: int, row: Mapping[str, Any], columns: Mapping[str, str]):
        self.source = source
        self.position = position
        self._row = row
        self._columns = columns
        self._task_id: str | None = None

    def _where(self) -> str:
        task = f" (task_id {self._task_id})" if self._task_id is not None else ""
        return f"dataset '{self.source}' row {self.position}{task}"

    def column(self, field: str) -> str:
        """The dataset column that holds ``field``."""
        return self._columns.get(field, field)

    def error(self, field: str, problem: str) -> UserError:
        """A one-line error about ``field`` of this row (named by its dataset column)."""
        return UserError(f"{self._where()}: field '{self.column(field)}' {problem}")

    def raw(self, field: str) -> Any:
        return self._row.get(self.column(field))

    def task_id(self) -> str:
        """The task id as text; MBPP's integer ids are accepted and kept as their digits."""
        value = self.raw("task_id")
        if value is None:
            raise self.error("task_id", "is missing")
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.error("task_id", f"must be text or an integer, not {_kind(value)}")
        text = str(value).strip()
        if not text:
            raise self.error("task_id", "is empty")
        self._check_encodable("task_id", text)
        if len(text) > MAX_TASK_ID:
            raise self.error("task_id", f"is {len(text)} characters long; at most {MAX_TASK_ID}")
        if not text.isprintable():  # a NUL, a newline or a tab would break every table it is in
            raise self.error("task_id", f"holds a control character: {ascii(text)[:80]}")
        self._task_id = text
        return text

    def text(self, field: str) -> str:
        """A required, non-empty string."""
        value = self.optional_text(field)
        if value is None:
            raise self.error(field, "is missing")
        if not value.strip():
            raise self.error(field, "is empty")
        return value

    def optional_text(self, field: str) -> str | None:
        value = self.raw(field)
        if value is not None and not isinstance(value, str):
            raise self.error(field, f"must be text, not {_kind(value)}")
        if value is not None:
            self._check_encodable(field, value)
        return value

    def _check_encodable(self, field: str, text: str, item: str = "") -> None:
        """JSON's ``"\\ud800"`` reads as a lone surrogate: a string no store, request or
        terminal can encode, which would fail only mid-run."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise self.error(field, f"{item}holds a lone surrogate ({text[exc.start]!a}) at "
                             f"character {exc.start + 1}: not Unicode text") from None

    def identifier(self, field: str) -> str:
        """A required Python function name."""
        value = self.text(field).strip()
        if not value.isidentifier() or keyword.iskeyword(value):
            raise self.error(field, f"must be a Python function name, not {value!r}")
        return value

    def text_list(self, field: str, *, required: bool = True) -> list[str]:
        """A list of non-empty strings; ``required`` also means the list is not empty."""
        value = self.raw(field)
        if value is None or (not required and value == []):
            if required:
                raise self.error(field, "is missing")
            return []
        if not isinstance(value, list):
            raise self.error(field, f"must be a list of text, not {_kind(value)}")
        if not value:
            raise self.error(field, "is empty")
        for index, item in enumerate(value, start=1):
            if not isinstance(item, str):
                raise self.error(field, f"item {index} must be text, not {_kind(item)}")
            if not item.strip():
                raise self.error(field, f"item {index} is empty")
            self._check_encodable(field, item, f"item {index} ")
        return value

    def number(self, field: str, default: float) -> float:
        """An optional non-negative finite number."""
        value = self.raw(field)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(field, f"must be a number, not {_kind(value)}")
        if not math.isfinite(value) or value < 0:
            raise self.error(field, f"must be a finite number >= 0, not {value!r}")
        return float(value)

    def parsed(self, field: str, source: str, what: str = "") -> ast.Module:
        """``source`` (this field's text, or built from it) parsed as Python."""
        try:
            return python_ast.parse(source)
        except (RecursionError, MemoryError) as exc:  # the parser's own stack: `-----…1`
            raise self.error(field, f"{what or 'is not valid Python'}: nested too deeply") from exc
        except (SyntaxError, ValueError) as exc:
            line = f" at line {exc.lineno}" if isinstance(exc, SyntaxError) and exc.lineno else ""
            message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
            raise self.error(field, f"{what or 'is not valid Python'}: {message}{line}") from exc


def defined_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module-level functions of a parsed program, by name (the last definition wins)."""
    return {
        node.name: node for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def check_function_fault(tree: ast.Module) -> str | None:
    """Why the test module's ``check`` cannot be called as ``check(candidate)`` with its asserts
    run, or None when it can. Why each matters: an ``async def`` or a generator returns an
    object at the call without running a line of its body, so every answer would pass, as it
    would with a test that holds nothing able to fail it; a signature that does not take exactly
    one argument fails every answer, the right ones too."""
    function = defined_functions(tree).get("check")
    if function is None:
        return "defines no function check(candidate)"
    if isinstance(function, ast.AsyncFunctionDef):
        return "defines check with 'async def': calling it runs none of its asserts"
    if any(isinstance(node, ast.Yield | ast.YieldFrom) for node in _own_nodes(function)):
        return "defines check as a generator (it yields): calling it runs none of its asserts"
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    required = len(positional) - len(arguments.defaults)
    required_keyword = None in arguments.kw_defaults  # a keyword-only argument with no default
    if required > 1 or required_keyword or (not positional and arguments.vararg is None):
        return "defines check without the one argument check(candidate) is called with"
    if not can_fail_an_answer(tree):
        return f"{CANNOT_FAIL}: its check would pass every answer"
    return None


CANNOT_FAIL = "holds no assert, raise or assert…() call (unittest's, numpy.testing's)"


def can_fail_an_answer(tree: ast.Module) -> bool:
    """Whether a test module holds anything that can fail an answer: an ``assert``, a ``raise``,
    or a call of a function whose name starts with ``assert`` (``self.assertEqual``,
    ``np.testing.assert_allclose``, a helper ``assertion(...)``)."""
    return any(_can_fail(node) for node in ast.walk(tree))


def _can_fail(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert | ast.Raise):
        return True
    if isinstance(node, ast.Call):
        callee = node.func
        name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
        return name.lower().startswith("assert")
    return False


def _own_nodes(function: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``function``'s own body: not those of functions, lambdas or classes defined
    inside it (a ``yield`` there does not make ``function`` a generator)."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
