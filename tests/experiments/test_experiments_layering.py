"""Import rules inside ``experiments`` (the run hub), checked on the source as tests/test_layering.py
checks the layers: the spec models stand below what runs them, the command line is a thin layer on
top that nothing else of the hub imports back, and only it parses arguments."""

from __future__ import annotations

from test_layering import _all_imports, _imports, _modules


def _of(package: str) -> dict[str, set[str]]:
    return {m: _imports(p) for m, p in _modules().items() if m == package or m.startswith(f"{package}.")}


def test_spec_models_import_nothing_that_runs_them():
    """A spec validates without the runner, the CLI or the optimisation loop: the API and the
    docs generator build on it, never the other way round."""
    runners = ("experiments.runner", "experiments.cli", "experiments.api", "experiments.optimize.loop")
    wrong = [f"{m} imports {i}" for m, imported in _of("experiments.spec").items()
             for i in imported if i.startswith(runners)]
    assert wrong == []


def test_nothing_but_the_cli_and_its_reference_page_imports_the_cli():
    """compare, rescore and the rest are library code the CLI calls (and the API exposes); the
    docs generator reads the parser to write the CLI reference."""
    allowed = ("experiments.cli", "experiments.docgen")
    wrong = [f"{m} imports {i}" for m, imported in _of("experiments").items()
             if not m.startswith(allowed) for i in imported if i.startswith("experiments.cli")]
    assert wrong == []


def test_only_the_cli_and_its_reference_page_parse_arguments():
    allowed = ("experiments.cli", "experiments.docgen.cli_reference")
    wrong = [m for m, p in _modules().items() if "argparse" in _all_imports(p) and not m.startswith(allowed)]
    assert wrong == []
