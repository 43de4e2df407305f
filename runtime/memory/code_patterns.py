"""``code_pattern`` entries: final code that passed every visible example, stored under a short
description (the function's name and the prompt's first line) so a later coder can recall how a
similar task was solved.

Only code that passed the examples the prompt shows is kept — that is all a run may know about
it; whether it also passed the hidden tests is never asked. Docstrings are dropped: the
description already says what the function does, and another task's docstring examples in a
later prompt would read as that task's examples. Only the entry point and what it uses (the
top-level functions, classes and names it reaches, and the imports) are kept: a small coder shown
memories copies them into its answer, and storing every function of such an answer would hand
each later task all the earlier ones' code, growing with every task (measured: the 0.5B coder
then answered with a remembered function instead of its own). Code longer than
``MAX_CODE_CHARS`` after that is not kept: cut, it would be a wrong example, and whole it would
crowd a small model's prompt; code Python cannot parse, or without the entry point, is not kept
either.
"""

from __future__ import annotations

import ast

from critiquelab.eval import python_ast
from critiquelab.runtime.memory.entries import MemoryEntry, task_tags
from critiquelab.runtime.memory.reflection import VisibleOutcome, task_summary

MAX_CODE_CHARS = 1200


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _solution_only(tree: ast.Module, entry_point: str) -> bool:
    """Keep in ``tree`` the imports, the entry point and the top-level statements it reaches by
    name (transitively); False when no top-level function is called ``entry_point``."""
    defines = {name: node for node in tree.body for name in _defined_names(node)}
    if not isinstance(defines.get(entry_point), ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    kept: set[int] = set()
    todo = [defines[entry_point]]
    while todo:
        node = todo.pop()
        if id(node) in kept:
            continue
        kept.add(id(node))
        todo += [defines[n.id] for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defines]
    tree.body = [node for node in tree.body
                 if id(node) in kept or isinstance(node, ast.Import | ast.ImportFrom)]
    return True


def solution_code(code: str, entry_point: str | None = None) -> str | None:
    """``code`` re-printed without module, class and function docstrings (and comments, which
    the parser drops) and, given ``entry_point``, with only that function and what it uses;
    None if it does not parse or does not define ``entry_point``."""
    try:
        tree = python_ast.parse(code)
    except SyntaxError:
        return None
    if entry_point and not _solution_only(tree, entry_point):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def code_pattern(
    *, role: str, task_id: str, run_id: str, prompt: str, entry_point: str, code: str,
    outcome: VisibleOutcome,
) -> MemoryEntry | None:
    """The entry for ``code`` (written by ``role``) without its docstrings, or None when it did
    not pass every visible example, none could be run, or it does not parse or is too long."""
    if outcome.passed is not True:
        return None
    code = (solution_code(code, entry_point or None) or "").strip()
    if not code or len(code) > MAX_CODE_CHARS:
        return None
    description = f"{entry_point}: {task_summary(prompt)}" if entry_point else task_summary(prompt)
    return MemoryEntry(
        role=role, type="code_pattern", task_id=task_id, run_id=run_id, tags=task_tags(prompt),
        # The description leads, so recall by a similar task's prompt finds it.
        content=f"Solved '{description}' with:\n{code}",
        context={"description": description, "entry_point": entry_point, "visible_passed": True,
                 "task_summary": task_summary(prompt)},
    )
