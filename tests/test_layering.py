"""The architecture's import rules, checked on the source: dependencies point one way and no
module imports itself back through others.

Layers (README "Layout"): ``core`` uses nothing of ours; ``signatures`` only itself and ``core``;
``eval`` only itself and ``core``; ``runtime`` (the agent runtime) adds ``signatures`` and ``eval``;
``pipelines`` adds ``runtime``; ``optimizers`` adds ``pipelines``; ``experiments`` may use
everything. Inside ``runtime``, a subsystem (pool, memory, scratchpad) imports no other subsystem
but the pool, which everything stands on and which imports nothing else of ``runtime``. Inside
``pipelines``, a pipeline's sub-package never imports another pipeline's. Neither runtime nor
pipelines import MLflow (the runner does the logging), and ``signatures`` imports nothing but DSPy,
pydantic and the standard library besides ``core``. Imports inside functions count too: deferring an
import hides a dependency from import time, not from the design; so do ``from package import
module`` (an edge to the module, not only to the package) and relative imports (resolved against the
importing module).
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "signatures", "eval", "runtime", "pipelines", "optimizers", "experiments")
ALLOWED = {
    "core": {"core"},
    "signatures": {"signatures", "core"},
    "eval": {"eval", "core"},
    "runtime": {"runtime", "signatures", "eval", "core"},
    "pipelines": {"pipelines", "runtime", "signatures", "eval", "core"},
    "optimizers": {"optimizers", "pipelines", "runtime", "signatures", "eval", "core"},
    "experiments": set(PACKAGES),
}
# A pipeline's sub-package is one with a pipeline.py: found, not listed, so a new one is checked too.
PIPELINE_PACKAGES = tuple(sorted(p.parent.name for p in (ROOT / "pipelines").glob("*/pipeline.py")))
SUBSYSTEMS = ("pool", "memory", "scratchpad")  # of runtime


@functools.cache
def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _all_imports(path: Path, root: Path = ROOT) -> set[str]:
    """Every module ``path`` imports, ours or not: for ``from package import name``, the package
    and ``package.name`` (a module of that name is what is imported, if there is one)."""
    package = list(path.relative_to(root).parts[:-1])  # of a package's __init__: the package itself
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            # relative: from the importing module's package, one level further up per extra dot
            base = package[:len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    # Our code imports itself as critiquelab.<package> (the namespace no user folder shadows);
    # the layers are the folders, so the prefix is dropped to name a module by its folder.
    return {name.removeprefix("critiquelab.") for name in names}


def _imports(path: Path) -> set[str]:
    """The modules of ours ``path`` imports (a ``from module import name`` whose name is no
    module is an edge to that module alone)."""
    ours = _modules()
    return {name for name in _all_imports(path) if name.split(".")[0] in PACKAGES
            and (name in ours or name.rsplit(".", 1)[0] not in ours)}


def _part(module: str, layer: str, parts: tuple[str, ...]) -> str | None:
    """Which of ``layer``'s sub-packages ``parts`` ``module`` belongs to, if any."""
    names = module.split(".")
    return names[1] if names[0] == layer and len(names) > 1 and names[1] in parts else None


def _inner_rules(module: str, imported: str) -> list[str]:
    """The rules inside a layer: between pipelines, and between the runtime's subsystems."""
    wrong = []
    here = _part(module, "pipelines", PIPELINE_PACKAGES)
    there = _part(imported, "pipelines", PIPELINE_PACKAGES)
    if module.startswith("pipelines.") and there is not None and here != there:
        wrong.append(f"{module} imports another pipeline's {imported}")
    here, there = _part(module, "runtime", SUBSYSTEMS), _part(imported, "runtime", SUBSYSTEMS)
    if here == "pool" and imported.startswith("runtime.") and there != "pool":
        wrong.append(f"the pool, which everything stands on, imports {imported}")
    if here is not None and there not in (None, "pool", here):
        wrong.append(f"the {here} subsystem imports another subsystem's {imported}")
    return wrong


def test_dependencies_point_one_way():
    wrong = []
    for module, path in _modules().items():
        layer = module.split(".")[0]
        for imported in _imports(path):
            if imported.split(".")[0] not in ALLOWED[layer]:
                wrong.append(f"{module} imports {imported}")
            wrong += _inner_rules(module, imported)
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


def _third_party(path: Path) -> set[str]:
    """The top-level names of what ``path`` imports from outside this project and the standard library."""
    tops = {name.split(".")[0] for name in _all_imports(path)}
    return {top for top in tops if top not in PACKAGES and top not in sys.stdlib_module_names and top}


def test_pipelines_and_runtime_never_import_mlflow():
    wrong = [f"{m} imports mlflow" for m, p in _modules().items()
             if m.split(".")[0] in ("pipelines", "runtime") and "mlflow" in _third_party(p)]
    assert wrong == []


def test_signatures_import_only_dspy_pydantic_and_the_standard_library():
    wrong = [f"{m} imports {', '.join(sorted(extra))}" for m, p in _modules().items()
             if m.startswith("signatures") and (extra := _third_party(p) - {"dspy", "pydantic"})]
    assert wrong == []


def test_the_import_reader_sees_submodules_and_relative_imports(tmp_path):
    """What the rules above rest on: ``from package import module`` and relative imports are
    edges to the module imported."""
    package = tmp_path / "pipelines" / "demo"
    package.mkdir(parents=True)
    source = package / "pipeline.py"
    source.write_text("from pipelines.demo import agents\nfrom .outcome import X\nfrom . import params\n"
                      "from .. import registry\n")
    (package / "__init__.py").write_text("from .pipeline import Demo\n")
    assert {"pipelines.demo.agents", "pipelines.demo.outcome", "pipelines.demo.params",
            "pipelines.registry"} <= _all_imports(source, tmp_path)
    assert "pipelines.demo.pipeline" in _all_imports(package / "__init__.py", tmp_path)


def test_every_pipeline_package_is_found():
    assert set(PIPELINE_PACKAGES) >= {"critic_loop", "debate", "vote", "tree_search", "architect", "sop",
                                      "role_play", "distinguish", "scratchpad"}
    assert {p.name for p in (ROOT / "runtime").iterdir() if (p / "__init__.py").is_file()} == set(SUBSYSTEMS)
