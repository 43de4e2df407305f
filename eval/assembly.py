"""Turn a model reply into a runnable program for a HumanEval-style prompt.

A reply may hold code in fenced blocks or as raw text, as a full function or only its body.
The prompt's own imports and helper functions are always kept, because some HumanEval
prompts define helpers the solution must call. Demo code the model adds at top level
(``print(f(3))``, ``if __name__ == "__main__":``, stray asserts) is dropped so it cannot
crash or slow the program.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from critiquelab.eval import python_ast

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START = re.compile(r"^(def |async def |class |import |from |@)", re.MULTILINE)


@dataclass(frozen=True)
class AssembledProgram:
    """A program ready to execute, or the reason it cannot be (``syntax``)."""

    source: str
    code: str
    syntax_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.syntax_error is None

    def implements(self, entry_point: str) -> bool:
        """Whether the program parses and its (last) ``entry_point`` does something: a body of
        only a docstring, ``pass``, ``...``, bare literals or ``raise NotImplementedError`` is a
        stub, not a solution."""
        if not self.ok:
            return False
        functions = _definitions(python_ast.parse(self.source), entry_point)
        return bool(functions) and not all(_inert(stmt) for stmt in functions[-1].body)


def _inert(stmt: ast.stmt) -> bool:
    """``pass``, ``raise NotImplementedError`` (a placeholder, not behaviour) or an expression
    statement that cannot have an effect (no call, await, yield)."""
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Raise):
        raised = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    effects = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
    return isinstance(stmt, ast.Expr) and not any(isinstance(n, effects) for n in ast.walk(stmt))


def _parses(source: str) -> bool:
    try:
        python_ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _trim_to_parseable(text: str) -> str:
    """Drop trailing prose lines until the text parses (bounded), else return it unchanged."""
    lines = text.rstrip().splitlines()
    for end in range(len(lines), max(0, len(lines) - 40), -1):
        candidate = "\n".join(lines[:end])
        if candidate.strip() and _parses(candidate):
            return candidate
    return text


def _is_statement(line: str) -> bool:
    """A line that parses as Python on its own (a block header given an empty body) and is more
    than a bare word, number or ``Label: text`` — which prose lines also parse as."""
    for text in (line, line + "\n    pass"):
        try:
            tree = python_ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        words = (ast.Name, ast.Constant)
        return not all(
            (isinstance(node, ast.Expr) and isinstance(node.value, words))
            or (isinstance(node, ast.AnnAssign) and node.value is None)
            for node in tree.body
        )
    return False


def contains_code(reply: str) -> bool:
    """Whether a reply has any Python in it at all: an empty or prose-only reply is "no code
    returned", which says more than a syntax error or a failed assertion."""
    return any(_is_statement(line.strip()) for line in reply.splitlines() if line.strip())


def extract_code(reply: str, entry_point: str) -> str:
    """The code in a reply: the fenced block that defines ``entry_point``, else all code blocks,
    else the raw text from its first line of code."""
    blocks = [
        body for lang, body in _FENCE.findall(reply) if lang.lower() in ("", "python", "py", "python3")
    ]
    if blocks:
        defining = [b for b in blocks if re.search(rf"\bdef\s+{re.escape(entry_point)}\s*\(", b)]
        chosen = defining[0] if defining else "\n\n".join(blocks)
        return chosen.strip("\n")
    text = reply.strip("\n")
    if _parses(text):
        return text
    start = _CODE_START.search(text)
    if start:
        return _trim_to_parseable(text[start.start() :])
    return text


def _definitions(tree: ast.Module, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module-level definitions of function ``name``, in order (the last one wins)."""
    return [
        node for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _is_demo(node: ast.stmt) -> bool:
    """A top-level expression (not a docstring-like constant), assert or main guard."""
    if isinstance(node, ast.Expr):
        return not isinstance(node.value, ast.Constant)  # a leading docstring is harmless
    return isinstance(node, ast.Assert) or _is_main_guard(node)


def _drop_demo_code(code: str) -> str:
    """Remove top-level expressions, asserts and main guards the model added as demos. A demo
    that shares a line with a statement that stays (``K = 3; print(K)``) is replaced by ``pass``
    in place, so the statement is kept."""
    tree = python_ast.parse(code)
    lines = re.split(r"\r\n|\r|\n", code)  # the line ends Python counts (not str.splitlines's)
    demos = [node for node in tree.body if _is_demo(node)]
    kept_lines = {
        line - 1 for node in tree.body if not _is_demo(node)
        for line in (node.lineno, node.end_lineno or node.lineno)
    }
    dropped: set[int] = set()
    for node in reversed(demos):  # right to left, so earlier offsets on a shared line hold
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        if {first, last} & kept_lines:
            head = lines[first].encode()[: node.col_offset]  # ast offsets count UTF-8 bytes
            tail = lines[last].encode()[node.end_col_offset :]
            lines[first] = (head + b"pass" + tail).decode()
            dropped.update(range(first + 1, last + 1))
        else:
            dropped.update(range(first, last + 1))
    return "\n".join(line for i, line in enumerate(lines) if i not in dropped)


def prompt_preamble(prompt: str, entry_point: str) -> str:
    """The prompt without the entry point's definition: its imports, helpers and constants."""
    lines = prompt.splitlines()
    try:
        tree = python_ast.parse(prompt)
    except SyntaxError:
        match = re.search(rf"^(async\s+)?def\s+{re.escape(entry_point)}\s*\(", prompt, re.MULTILINE)
        return prompt[: match.start()] if match else prompt
    keep = [True] * len(lines)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            for i in range(first, node.end_lineno or node.lineno):
                keep[i] = False
    return "\n".join(line for line, k in zip(lines, keep, strict=True) if k)


def _body_program(prompt: str, code: str) -> str:
    body = textwrap.dedent(code).strip("\n")
    indented = textwrap.indent(body, "    ") if body else "    pass"
    return prompt.rstrip("\n") + "\n" + indented + "\n"


def assemble_program(prompt: str, reply: str, entry_point: str) -> AssembledProgram:
    """Build the program that defines ``entry_point`` from a prompt and a model reply."""
    code = extract_code(reply, entry_point)
    try:
        tree = python_ast.parse(code)
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None and any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom)
        for n in tree.body
    ):
        code = _drop_demo_code(code)
        if _definitions(python_ast.parse(code), entry_point):
            source = prompt_preamble(prompt, entry_point).rstrip("\n") + "\n\n" + code + "\n"
        else:
            # Helpers without the entry point: keep the prompt's stub so the failure is honest.
            source = prompt.rstrip("\n") + "\n\n" + code + "\n"
    else:
        source = _body_program(prompt, code)
    try:
        python_ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        return AssembledProgram(source=source, code=code, syntax_error=f"{message}{where}")
    return AssembledProgram(source=source, code=code)
