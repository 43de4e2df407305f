"""Documentation tables generated from studies, never typed: ``critiquelab study tables``.

A Markdown file (README.md, a page under docs/) marks where a study's figures go::

    <!-- study: test_half_selection vs=baseline arms=baseline,greedy_filter10 -->
    (generated: do not edit)
    <!-- /study -->

and ``critiquelab study tables FILE…`` rewrites what stands between the markers from the study
folder ``studies/<name>``: a line with the study's evidence status and a link to it, then one row
per arm — pass@1 with its count and 95% Wilson interval, tokens per problem, and the paired
comparison with the ``vs`` arm (problems only it / only the reference solved, exact McNemar p).
``--check`` changes nothing and fails when a block differs from what its study gives: the test
suite runs it over the README and the documentation, so a figure cannot drift from its data.
``<!-- studies -->`` … ``<!-- /studies -->`` lists every study of the folder, one line each.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.experiments.studies.read import Study, load_study

STUDY_BLOCK = re.compile(r"(<!-- study: (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /study -->)", re.S)
INDEX_BLOCK = re.compile(r"(<!-- studies -->\n)(?P<body>.*?)(<!-- /studies -->)", re.S)


@dataclass(frozen=True)
class BlockArgs:
    """What a ``<!-- study: … -->`` marker asks for."""

    name: str
    vs: str | None = None  # the reference arm of the paired columns (default: the study's first arm)
    arms: tuple[str, ...] = ()  # the arms shown, in this order (default: all)


def parse_args(text: str, where: str) -> BlockArgs:
    words = text.split()
    if not words:
        raise UserError(f"{where}: a study block names no study (<!-- study: NAME … -->)")
    options: dict[str, str] = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or key not in ("vs", "arms") or not value:
            raise UserError(f"{where}: study block option '{word}': use vs=ARM or arms=A,B")
        options[key] = value
    arms = tuple(options["arms"].split(",")) if "arms" in options else ()
    return BlockArgs(words[0], options.get("vs"), arms)


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f}"


def _p(value: float) -> str:
    if math.isnan(value):
        return "–"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def study_table(study: Study, args: BlockArgs, link: str) -> str:
    """The generated text of one block: the status line and the arms' table."""
    comparison = study.compare(n_resamples=999)  # McNemar is exact; the bootstrap CI is not shown
    table, pairs = comparison.table, comparison.pairs
    labels = list(table["pipeline"])
    shown = list(args.arms) or labels
    reference = args.vs or labels[0]
    unknown = [a for a in [*shown, reference] if a not in labels]
    if unknown:
        raise UserError(f"study {study.manifest.name} has no arm '{unknown[0]}'; "
                        f"its arms: {', '.join(labels)}")
    manifest = study.manifest
    lines = [
        f"*{manifest.dataset.source}, {manifest.dataset.split} split, {manifest.dataset.problems} problems — "
        f"{study.evidence_text}. Data: [{manifest.name}]({link}).*", "",
        f"| arm | pass@1 (passed) | 95% CI | tokens/problem | vs {reference}: only it / only {reference} "
        "| p (McNemar) |",
        "|---|---|---|---|---|---|",
    ]
    for label in shown:
        row = table[table["pipeline"] == label].iloc[0]
        paired = "–", "–"
        if label != reference:
            pair = _pair(pairs, label, reference)
            paired = f"{pair['only_a']} / {pair['only_b']}", _p(float(pair["mcnemar_p"]))
        lines.append(
            f"| {label} | {_pct(float(row['pass@1']))} ({int(row['passed'])}/{int(row['attempts'])}) | "
            f"[{_pct(float(row['ci_low']))}, {_pct(float(row['ci_high']))}] | "
            f"{float(row['tokens/problem']):,.0f} | "
            f"{paired[0]} | {paired[1]} |"
        )
    return "\n".join(lines) + "\n"


def _pair(pairs: Any, label: str, reference: str) -> dict[str, Any]:
    """The pair (label, reference) with ``a`` = label, whichever order compare listed it in."""
    for row in pairs.to_dict("records"):
        if (row["a"], row["b"]) == (label, reference):
            return dict(row)
        if (row["a"], row["b"]) == (reference, label):
            return {**row, "only_a": row["only_b"], "only_b": row["only_a"]}
    raise UserError(f"no paired comparison of {label} and {reference}")


def index_table(root: Path, link: Callable[[str], str]) -> str:
    lines = ["| study | question | problems | evidence |", "|---|---|---|---|"]
    for folder in sorted(p for p in root.iterdir() if (p / "manifest.json").is_file()):
        study = load_study(folder)
        manifest = study.manifest
        evidence = manifest.evidence.replace("_", "-")
        lines.append(f"| [{manifest.name}]({link(folder.name)}) | {manifest.description} | "
                     f"{manifest.dataset.problems} ({manifest.dataset.split}) | {evidence} |")
    return "\n".join(lines) + "\n"


def _linker(where: Path, root: Path, docs: Path) -> Callable[[str], str]:
    """How the file ``where`` links to a study: a page of the documentation to the study's page
    of the site (``docs/studies/NAME.md``, generated at build time: the site cannot link outside
    itself), any other file (the README) to the study's folder."""
    here = where.resolve().parent
    if docs.resolve() in where.resolve().parents:
        pages = docs.resolve() / "studies"
        return lambda name: os.path.relpath(pages / f"{name}.md", here).replace(os.sep, "/")
    return lambda name: os.path.relpath(root.resolve() / name, here).replace(os.sep, "/")


def refresh_text(text: str, where: Path, root: Path, docs: Path = Path("docs")) -> str:
    """``text`` (the file ``where``) with every block regenerated from the studies in ``root``;
    ``docs``: the documentation's folder (its pages link to the site's study pages)."""
    link = _linker(where, root, docs)

    def study_block(match: re.Match[str]) -> str:
        args = parse_args(match.group("args"), str(where))
        body = study_table(load_study(root / args.name), args, link(args.name))
        return f"{match.group(1)}{body}{match.group(4)}"

    text = STUDY_BLOCK.sub(study_block, text)
    return INDEX_BLOCK.sub(lambda m: f"{m.group(1)}{index_table(root, link)}{m.group(3)}", text)


def refresh_files(paths: Sequence[Path], root: Path, *, check: bool, docs: Path = Path("docs")) -> list[Path]:
    """Regenerate the blocks of ``paths``; return the files whose blocks changed (``check``:
    that would change — nothing is written). ``docs``: the documentation's folder."""
    if not root.is_dir():
        raise UserError(f"studies folder '{root}' does not exist")
    changed = []
    for path in paths:
        if not path.is_file():
            raise UserError(f"'{path}' is not a file")
        text = path.read_text()
        new = refresh_text(text, path, root, docs)
        if new != text:
            changed.append(path)
            if not check:
                path.write_text(new)
    return changed
