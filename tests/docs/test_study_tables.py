"""Every results table in the README, the documentation and studies/README.md is what its committed
study gives (issue #55): `critiquelab study tables --check` over them finds no difference."""

from __future__ import annotations

from pathlib import Path

from critiquelab.experiments.studies.read import load_study
from critiquelab.experiments.studies.tables import refresh_files

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "studies"


def _pages() -> list[Path]:
    return [ROOT / "README.md", STUDIES / "README.md",
            *sorted(p for p in (ROOT / "docs").rglob("*.md") if "examples" not in p.parts)]


def test_every_committed_study_reads_back_whole() -> None:
    for folder in sorted(p for p in STUDIES.iterdir() if (p / "manifest.json").is_file()):
        assert len(load_study(folder).outcomes) > 0


def test_no_table_in_the_documentation_differs_from_its_study() -> None:
    assert refresh_files(_pages(), STUDIES, check=True, docs=ROOT / "docs") == []
