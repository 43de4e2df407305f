"""The architect's plan: checking the tasks the model proposed, ordering them by dependency
into waves that developers can work on in parallel, and integrating the finished code."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from critiquelab.eval import python_ast
from critiquelab.signatures.team_contracts import DeveloperOutput, TaskAssignment

_PRIORITY = {"high": 0, "medium": 1, "low": 2}
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


@dataclass
class Plan:
    """Tasks in dependency order (``waves``: each wave's tasks depend only on earlier waves), and
    what was changed in the model's proposal to make it usable (``notes``)."""

    tasks: list[TaskAssignment]
    waves: list[list[TaskAssignment]]
    notes: list[str] = field(default_factory=list)


def whole_task(description: str, entry_point: str) -> TaskAssignment:
    """The whole problem as one task (a small problem, or a plan that could not be used)."""
    text = f"Implement {entry_point} as the problem describes. {description}".strip()
    return TaskAssignment(task_id="main", function_name=entry_point, priority="high", description=text)


def _waves(tasks: Sequence[TaskAssignment]) -> list[list[TaskAssignment]] | None:
    """Kahn's layers, high priority first within a layer; None if the dependencies form a cycle."""
    done: set[str] = set()
    left = list(tasks)
    waves = []
    while left:
        ready = [t for t in left if set(t.dependencies) <= done]
        if not ready:
            return None
        ready.sort(key=lambda t: (_PRIORITY[t.priority], t.task_id))
        waves.append(ready)
        done |= {t.task_id for t in ready}
        left = [t for t in left if t.task_id not in done]
    return waves


def make_plan(proposed: Sequence[TaskAssignment], entry_point: str, *, max_tasks: int) -> Plan:
    """The proposal made usable, or the whole problem as one task when it cannot be: exactly one
    task must define ``entry_point``, ids and function names must be unique identifiers,
    dependencies must exist and form no cycle, and there may be at most ``max_tasks`` tasks."""
    notes: list[str] = []
    tasks = list(proposed)
    ids = [t.task_id for t in tasks]
    names = [t.function_name for t in tasks]
    problem = ""
    if not tasks:
        problem = "the architect proposed no task"
    elif len(tasks) > max_tasks:
        problem = f"{len(tasks)} tasks proposed, more than max_tasks={max_tasks}"
    elif names.count(entry_point) != 1:
        problem = f"{names.count(entry_point)} tasks define {entry_point}, not exactly one"
    elif len(set(ids)) != len(ids) or len(set(names)) != len(names):
        problem = "task ids or function names repeat"
    elif not all(_IDENTIFIER.match(n) for n in names):
        problem = "a function name is not a Python identifier"
    if not problem:
        cleaned = []
        for task in tasks:
            unknown = [d for d in task.dependencies if d not in ids or d == task.task_id]
            if unknown:
                notes.append(f"task {task.task_id}: dropped unknown dependencies {unknown}")
            cleaned.append(task.model_copy(update={
                "dependencies": [d for d in task.dependencies if d not in unknown]}))
        waves = _waves(cleaned)
        if waves is not None:
            return Plan(cleaned, waves, notes)
        problem = "the dependencies form a cycle"
    main = next((t for t in tasks if t.function_name == entry_point), None)
    whole = whole_task(main.description if main else "", entry_point)
    return Plan([whole], [[whole]], [*notes, f"{problem}: the problem stays one task"])


def defined_functions(code: str) -> list[str]:
    """Top-level function names ``code`` defines ([] if it does not parse)."""
    try:
        tree = python_ast.parse(code)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def integrate(plan: Plan, outputs: dict[str, DeveloperOutput]) -> tuple[str, list[str]]:
    """One module from the developers' code, in dependency order (the main function last): each
    task keeps its imports, its own function and its private helpers; a definition of another
    task's function is dropped (each function has one owner). Returns the code and notes."""
    owners = {t.function_name: t.task_id for t in plan.tasks}
    imports: list[str] = []
    bodies: list[str] = []
    notes: list[str] = []
    for task in (t for wave in plan.waves for t in wave):
        output = outputs.get(task.task_id)
        if output is None or output.status == "failed":
            continue
        try:
            tree = python_ast.parse(output.code)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                line = ast.unparse(node)
                imports.extend([line] if line not in imports else [])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and owners.get(
                node.name, task.task_id
            ) != task.task_id:
                notes.append(f"task {task.task_id}: dropped its own {node.name}, owned by "
                             f"task {owners[node.name]}")
            else:
                decorated = bool(getattr(node, "decorator_list", None))  # the segment would lose them
                bodies.append(ast.unparse(node) if decorated else
                              ast.get_source_segment(output.code, node) or ast.unparse(node))
    return "\n".join([*imports, "", *bodies]).strip() + "\n", notes
