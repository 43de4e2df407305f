"""``critiquelab study write|check|show``: a thin layer over :mod:`critiquelab.experiments.studies`.
(``critiquelab compare STUDY_DIR`` and ``rescore STUDY_DIR`` read a study too.)"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from critiquelab.core.errors import ExitCode
from critiquelab.experiments.cli.arg_types import output_dir


def one_line(text: str) -> str:
    """Text a study shows inside one table line: printable, with no line break."""
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"must be one line of printable text, got {ascii(text)[:60]}")
    return text


def a_path(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text)


EVIDENCE_HELP = ("held_out (nothing reported was chosen on these problems) or in_sample (a choice "
                 "reported was made on them); printed beside every figure of the study")


def add_evidence_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """--evidence, --tuned-on and --note: what a study says about its own figures."""
    parser.add_argument("--evidence", choices=["held_out", "in_sample"], required=required,
                        help=EVIDENCE_HELP)
    parser.add_argument("--tuned-on", default="", metavar="TEXT", type=one_line,
                        help="which problems any choice reported here was tuned on, e.g. 'dev half'")
    parser.add_argument("--note", action="append", default=[], metavar="TEXT", type=one_line,
                        help="a line a reader must know beside the figures (repeatable)")


def add_study_parser(commands: Any) -> None:
    study = commands.add_parser(
        "study", help="write, check or show a study: a run's results as committed files")
    verbs = study.add_subparsers(dest="study_command", required=True, parser_class=type(study))
    write = verbs.add_parser("write", help="write a study folder from finished runs")
    write.add_argument("runs", nargs="+", help="a parent run id (all its pipeline runs) or pipeline run ids")
    write.add_argument("--out", type=output_dir, required=True, help="the study folder, e.g. studies/NAME")
    add_evidence_options(write, required=True)
    write.add_argument("--description", type=one_line, help="one sentence (default: the spec's description)")
    write.add_argument("--replace", action="store_true", help="write over a study folder that holds files")
    check = verbs.add_parser("check", help="check study folders: files, checksums, columns, finished runs")
    check.add_argument("folders", nargs="+", type=Path, help="study folders")
    show = verbs.add_parser("show", help="a study's manifest and its summary")
    show.add_argument("folder", type=Path, help="a study folder")
    tables = verbs.add_parser("tables", help="regenerate the study tables marked in Markdown files "
                              "(<!-- study: NAME --> … <!-- /study -->)")
    tables.add_argument("files", nargs="*", type=Path,
                        help="Markdown files (default: README.md, the studies folder's README.md and "
                        "the documentation's pages)")
    tables.add_argument("--root", type=Path, default=Path("studies"),
                        help="the studies folder (default studies)")
    tables.add_argument("--docs", type=a_path, default=Path("docs"),
                        help="the documentation's folder, whose pages link to the site's study pages "
                        "(default docs)")
    tables.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each file whose tables differ from its studies")


def _tables(args: argparse.Namespace) -> int:
    from critiquelab.experiments.studies.tables import refresh_files

    found = [Path("README.md"), args.root / "README.md", *sorted(args.docs.rglob("*.md"))]
    files = args.files or [p for p in found if p.is_file()]
    changed = refresh_files(files, args.root, check=args.check, docs=args.docs)
    for path in changed:
        print(f"{path}: {'differs from its studies' if args.check else 'tables regenerated'}")
    if args.check and changed:
        print(f"critiquelab: {len(changed)} file(s) out of date; run `critiquelab study tables`",
              file=sys.stderr)
        return ExitCode.CHECK_FAILED
    return ExitCode.DONE


def cmd_study(args: argparse.Namespace) -> int:
    from critiquelab.experiments.studies.read import load_study
    from critiquelab.experiments.studies.write import write_study

    if args.study_command == "tables":
        return _tables(args)
    if args.study_command == "write":
        folder = write_study(args.runs, args.out, evidence=args.evidence, tuned_on=args.tuned_on,
                             notes=args.note, description=args.description, home=args.home,
                             replace=args.replace)
        study = load_study(folder)
        print(f"study {study.manifest.name} written to {folder}: {len(study.outcomes)} outcomes, "
              f"{len(study.arms)} pipeline runs ({study.evidence_text})")
        return 0
    if args.study_command == "check":
        for folder in args.folders:
            study = load_study(folder)
            print(f"{folder}: ok — {len(study.outcomes)} outcomes of {len(study.arms)} pipeline runs on "
                  f"{study.manifest.dataset.problems} problems; {study.evidence_text}")
        return 0
    study = load_study(args.folder)
    manifest = study.manifest
    print(f"study {manifest.name}: {manifest.description}\n{study.evidence_text}\n"
          f"{manifest.dataset.source}, {manifest.dataset.split} split, {manifest.dataset.problems} problems; "
          f"commit {manifest.git_commit}; runs {', '.join(manifest.parent_run_ids)}; "
          f"{manifest.started} to {manifest.ended}\n")
    print((study.path / "summary.md").read_text())
    return 0
