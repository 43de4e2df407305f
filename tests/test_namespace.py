"""``import critiquelab`` cannot be shadowed by a user's folders, and our own code never imports
itself by a top-level name a user's folder could shadow (issue #58).

The packages are the repository's top-level folders, reached as ``critiquelab.<package>``
through the links in ``critiquelab/``; the checks run a fresh interpreter whose working directory
holds a researcher's own ``experiments/``, ``eval/`` and ``core/`` (first on ``sys.path``, as
beside a notebook), with the repository after it, as the editable install puts it.
"""

# namespace_rewrite: leave this file (it names a user's own top-level packages on purpose)

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "signatures", "eval", "pipelines", "optimizers", "experiments", "runtime")
STUDY = ROOT / "studies" / "test_half_baseline"

# Run in the user's folder: our code must come from the repository, the user's from theirs.
USER_SCRIPT = """
import json, sys
import critiquelab
from critiquelab import Study
study_dir, root, packages = sys.argv[1], sys.argv[2], set(sys.argv[3].split(","))
study = critiquelab.load_study(study_dir)
assert isinstance(study, Study)
rows = len(study.outcomes)
import experiments.api, eval.metrics  # the user's own, in the same process
ours = sorted(name for name, module in sys.modules.items()
              if name.split(".")[0] in packages and root in str(getattr(module, "__file__", None)))
print(json.dumps({"rows": rows, "user_api": experiments.api.WHO, "user_metrics": eval.metrics.WHO,
                  "experiments_file": experiments.__file__,
                  "api_file": sys.modules["critiquelab.experiments.api"].__file__,
                  "ours_under_top_level_names": ours}))
"""


def _user_folder(tmp_path: Path) -> Path:
    """A researcher's folder with packages named as ours; importing one of these from our code
    would fail loudly (their ``core.errors`` raises)."""
    for package, module in (("experiments", "api"), ("eval", "metrics"), ("core", "errors")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        body = (f"WHO = 'user {package}.{module}'\n" if package != "core"
                else "raise ImportError('the user core.errors was imported')\n")
        (tmp_path / package / f"{module}.py").write_text(body)
    return tmp_path


def _python(code: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_users_folders_shadow_neither_critiquelab_nor_its_own_imports(tmp_path):
    folder = _user_folder(tmp_path)
    done = _python(USER_SCRIPT, folder, str(STUDY), str(ROOT), ",".join(PACKAGES))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["rows"] > 0  # the committed study, read through our code
    assert seen["user_api"] == "user experiments.api" and seen["user_metrics"] == "user eval.metrics"
    assert Path(seen["experiments_file"]).parent == folder / "experiments"
    assert Path(seen["api_file"]).resolve() == ROOT / "experiments" / "api.py"
    # No module of ours loaded a second time under a top-level name (two copies of a class).
    assert seen["ours_under_top_level_names"] == []


def test_importing_critiquelab_loads_none_of_its_packages(tmp_path):
    """The re-exports load on first use, so a layer's import (the sandbox checker's, say) does
    not drag the run hub in through the package."""
    code = "import sys, critiquelab; print(sorted(m for m in sys.modules if m.startswith('critiquelab.')))"
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def _type_checking_names(tree: ast.Module) -> dict[str, str]:
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom) and imported.module
                names.update({alias.name: imported.module for alias in imported.names})
    return names


def test_every_re_exported_name_is_declared_once_and_resolves():
    import critiquelab

    declared = _type_checking_names(ast.parse((ROOT / "critiquelab" / "__init__.py").read_text()))
    assert sorted(declared) == critiquelab.__all__
    for name, module in declared.items():
        assert getattr(critiquelab, name) is getattr(sys.modules[module], name), name
    with pytest.raises(AttributeError):
        _ = critiquelab.no_such_name


def _sources() -> list[Path]:
    found = [ROOT / "critiquelab" / "__init__.py"]
    for folder in (*PACKAGES, "tests", "docs", "benchmarks", "scripts"):
        found.extend(p for p in (ROOT / folder).rglob("*.py") if "site-packages" not in p.parts)
    return sorted(found)


def test_our_code_imports_itself_only_through_critiquelab():
    """``from experiments.x import y`` anywhere of ours would load a user's ``experiments/``
    beside a notebook, or a second copy of ours next to ``critiquelab.experiments.x``."""
    wrong = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            wrong.extend(f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in names
                         if name.split(".")[0] in PACKAGES)
    assert not wrong, "\n".join(wrong)


def test_the_namespace_links_every_package_folder():
    for package in PACKAGES:
        if (ROOT / package).is_dir():
            link = ROOT / "critiquelab" / package
            assert link.is_symlink() and os.readlink(link) == f"../{package}", package
