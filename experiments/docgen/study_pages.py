"""A page of the site per committed study (``studies/NAME.md``): what it measured, under which
evidence status, where it came from, and compare's summary re-read from the study's own files.
The findings tables link here; the pages are not in the navigation (``not_in_nav`` in mkdocs.yml)."""

from __future__ import annotations

from pathlib import Path

from critiquelab.experiments.docgen.markdown import cell, code, generated_note, table


def study_page(folder: Path) -> str:
    from critiquelab.experiments.studies.read import load_study

    study = load_study(folder)
    manifest = study.manifest
    provenance = [
        ("evidence", cell(study.evidence_text)),
        ("dataset", cell(f"{manifest.dataset.source}, {manifest.dataset.split} split, "
                         f"{manifest.dataset.problems} problems")),
        ("experiment runs", ", ".join(code(r) for r in manifest.parent_run_ids)),
        ("commit", code(manifest.git_commit)),
        ("models", ", ".join(f"{code(m)} {code(h[:16])}" for m, h in manifest.model_sha256.items())),
        ("ran", cell(f"{manifest.started} to {manifest.ended} ({manifest.wall_time_s:,.0f} s of runs)")),
        ("model calls", cell(f"{manifest.lm_calls:,}, {manifest.cached_lm_calls:,} of them replayed from "
                             "the LM cache")),
        ("machine", cell(manifest.machine)),
        ("versions", ", ".join(f"{k} {v}" for k, v in sorted(manifest.versions.items()))),
    ]
    summary = (folder / "summary.md").read_text().split("\n", 1)[-1]  # its title is this page's
    return "\n".join([
        f"# Study `{manifest.name}`\n",
        generated_note(f"the committed study `studies/{manifest.name}/`"),
        f"{manifest.description}\n",
        *(f"- {note}" for note in manifest.notes),
        "",
        table(["", ""], provenance),
        f"Re-compute everything below: `critiquelab compare studies/{manifest.name}`.\n",
        summary,
    ])


def study_pages(root: Path) -> dict[str, str]:
    """``studies/NAME.md`` -> its page, for every study folder under ``root / 'studies'``."""
    studies = root / "studies"
    if not studies.is_dir():
        return {}
    return {f"studies/{folder.name}.md": study_page(folder)
            for folder in sorted(studies.iterdir()) if (folder / "manifest.json").is_file()}
