"""Install a package the way a user would (pip, from its own pyproject) into a folder of the
test session's, and make it importable and its entry points visible to this process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "critiquelab_example_pipeline"


def pip_install(source: Path, work: Path) -> Path:
    """``source`` (a folder with a pyproject) installed into ``work/site`` by this venv's pip:
    from a copy, so the build leaves nothing in the checkout; no index and no build isolation,
    so it needs no network (the venv's setuptools builds it); no dependencies (critiquelab is
    the one running)."""
    copy = work / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(target), str(copy)],
        check=True, capture_output=True, text=True,
    )
    return target


@contextmanager
def on_path(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` (its modules importable, its ``*.dist-info`` entry points
    found), the registries reading entry points again on entering and on leaving."""
    from critiquelab.eval.formats import rescan as rescan_formats
    from critiquelab.pipelines.registry import rescan

    sys.path.insert(0, str(folder))
    rescan(), rescan_formats()
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        rescan(), rescan_formats()


def fake_distribution(folder: Path, name: str, entry_points: str, modules: dict[str, str]) -> Path:
    """A minimal installed distribution in ``folder``: ``modules`` (file name -> source) and a
    ``NAME-0.1.dist-info`` with ``entry_points`` (the entry_points.txt text)."""
    folder.mkdir(parents=True, exist_ok=True)
    for file, source in modules.items():
        (folder / file).write_text(source)
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return folder
