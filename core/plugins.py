"""Code from outside the package, loaded the two ways inspect_ai loads tasks: an installed
distribution's entry points (``[project.entry-points."critiquelab.pipelines"]`` in its
pyproject), and a reference a spec writes — ``package.module:Name`` (an importable module) or
``path/to/file.py:Name`` (a file, which need not be on ``sys.path``).

Loading runs the user's code, so anything it raises (a missing dependency, a syntax error, an
exception at import) is one :class:`~critiquelab.core.errors.UserError` line naming the plugin: exit 2, as
for any bad input, never a traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from critiquelab.core.errors import UserError


@dataclass(frozen=True)
class Loaded:
    """One entry point's object: ``name`` (the entry point's), ``distribution`` (the installed
    package declaring it), ``source`` (both, as messages name them) and ``value`` (what its
    ``module:attr`` points to)."""

    name: str
    distribution: str
    source: str
    value: Any


def _one_line(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())


def _distribution(entry: EntryPoint) -> str:
    return entry.dist.name if entry.dist is not None else "an unknown distribution"


def entry_point_objects(group: str) -> list[Loaded]:
    """Every entry point of ``group``, loaded; one that fails to import is one UserError line."""
    loaded = []
    for entry in sorted(entry_points(group=group), key=lambda e: (e.name, e.value)):
        source = f"entry point '{entry.name} = {entry.value}' of {_distribution(entry)} ({group})"
        try:
            value = entry.load()
        except Exception as exc:  # the plugin's own code: whatever it raises is its author's to fix
            raise UserError(f"{source} fails to load: {_one_line(exc)}") from exc
        loaded.append(Loaded(entry.name, _distribution(entry), source, value))
    return loaded


def is_reference(name: str) -> bool:
    """``module:Name`` or ``file.py:Name`` rather than a registered name."""
    return ":" in name


def _split(reference: str, what: str) -> tuple[str, str]:
    place, _, attr = reference.rpartition(":")
    if not place or not attr.isidentifier():
        raise UserError(f"{what} '{reference}': expected package.module:Name or path/to/file.py:Name")
    return place, attr


def _is_file(place: str) -> bool:
    return place.endswith(".py") or "/" in place or "\\" in place


def anchored(reference: str, base: Path) -> str:
    """``reference`` with a relative file path made absolute from ``base`` (a spec's directory),
    so the name a run records loads from anywhere; module references and names are unchanged."""
    if not is_reference(reference):
        return reference
    place, _, attr = reference.rpartition(":")
    if not _is_file(place) or Path(place).is_absolute():
        return reference
    return f"{(base / place).resolve()}:{attr}"


def _import_file(path: Path) -> ModuleType:
    """The module of file ``path``, imported once per process under a name of its own (the
    file's stem and a digest of its path, so two ``pipes.py`` in different folders differ)."""
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
    name = f"critiquelab_user.{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pydantic look their module up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_reference(reference: str, what: str) -> tuple[ModuleType, str]:
    """The module ``reference`` names and the name after its colon; a file that is not there or
    a module that fails to import is one UserError line naming ``what`` and the reference."""
    place, attr = _split(reference, what)
    try:
        if _is_file(place):
            path = Path(place)
            if not path.is_file():
                raise UserError(f"{what} '{reference}': no file {path}")
            return _import_file(path), attr
        return importlib.import_module(place), attr
    except UserError:
        raise
    except Exception as exc:  # the user's code: whatever its import raises is one line to them
        raise UserError(f"{what} '{reference}': {place} fails to import: {_one_line(exc)}") from exc
