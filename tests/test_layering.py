"""The architecture's import rules, checked on the source: dependencies point one way and no
module imports itself back through others.

Layers (README "Layout"): ``core`` uses nothing of ours; ``signatures`` only itself and ``core``;
``eval`` only itself and ``core``; ``pipelines`` adds ``signatures`` and ``eval``; ``optimizers``
adds ``pipelines``; ``experiments`` may use everything. Inside ``pipelines``, a pipeline's
sub-package never imports another pipeline's (nor does a subsystem: pool, memory, scratchpad), and
the pool imports nothing else of ``pipelines``. Imports inside functions count too: deferring an
import hides a dependency from import time, not from the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "signatures", "eval", "pipelines", "optimizers", "experiments")
ALLOWED = {
    "core": {"core"},
    "signatures": {"signatures", "core"},
    "eval": {"eval", "core"},
    "pipelines": {"pipelines", "signatures", "eval", "core"},
    "optimizers": {"optimizers", "pipelines", "signatures", "eval", "core"},
    "experiments": set(PACKAGES),
}
PIPELINE_PACKAGES = ("critic_loop", "debate", "vote", "tree_search", "architect", "sop", "role_play",
                     "distinguish")
SUBSYSTEMS = ("pool", "memory", "scratchpad")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.split(".")[0] in PACKAGES}


def _pipeline_part(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "pipelines" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in PIPELINE_PACKAGES + SUBSYSTEMS else None


def test_dependencies_point_one_way():
    wrong = []
    for module, path in _modules().items():
        layer = module.split(".")[0]
        for imported in _imports(path):
            if imported.split(".")[0] not in ALLOWED[layer]:
                wrong.append(f"{module} imports {imported}")
            if layer != "pipelines":
                continue
            here, there = _pipeline_part(module), _pipeline_part(imported)
            if there in PIPELINE_PACKAGES and here != there:
                wrong.append(f"{module} imports another pipeline's {imported}")
            if here == "pool" and imported.startswith("pipelines.") and there != "pool":
                wrong.append(f"the pool, which everything stands on, imports {imported}")
    assert wrong == []


def test_no_import_cycle():
    modules = _modules()
    graph = {m: {i for i in _imports(p) if i in modules and i != m}
             for m, p in modules.items()}
    cycles, state = [], dict.fromkeys(graph, 0)  # 0 new, 1 on the current path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph[module]):
            if state[imported] == 1:
                cycles.append(" → ".join([*path[path.index(imported):], imported]))
            elif state[imported] == 0:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(graph):
        if state[module] == 0:
            visit(module, [module])
    assert cycles == []
