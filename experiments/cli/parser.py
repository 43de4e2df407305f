"""The ``critiquelab`` command line's verbs and options (argparse). Every argument's type checks
its value (:mod:`critiquelab.experiments.cli.arg_types`), so a bad one is refused before any work."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn

from critiquelab.core.errors import ExitCode
from critiquelab.experiments.cli.arg_types import (
    comma_separated,
    comma_separated_ints,
    data_home,
    dataset_format,
    output_dir,
    port,
    prompt_prefix,
    request_timeout,
)
from critiquelab.experiments.cli.memory import add_memory_parser
from critiquelab.experiments.cli.rescore import add_rescore_parser
from critiquelab.experiments.cli.study import add_evidence_options, add_study_parser

# Printed by --help as written (plain text: no reST or Markdown markup a terminal would show raw).
DESCRIPTION = """\
Run multi-agent code-generation experiments, compare their pipelines, look at what the
agents did, and optimise and export their prompts. Everything here is also a Python API
(critiquelab.experiments.api)."""
EPILOG = """\
'critiquelab VERB --help' shows a verb's options; 'critiquelab pipelines' lists the pipelines
a spec can name.

exit codes (the documentation's exit-code reference says each in full): """ + ", ".join(
    f"{code.value} {code.name.lower().replace('_', ' ')}" for code in ExitCode) + "."


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2) like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.BAD_INPUT, f"critiquelab: error: {message} (see '{self.prog} --help')\n")


def _add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="run an experiment spec (YAML)")
    run.add_argument("spec", type=Path, help="experiment YAML, e.g. experiments/baseline.yaml")
    run.add_argument("--model", help="'local' (default), 'local-1.5b', or a LiteLLM model string")
    run.add_argument("--api-base", help="endpoint URL for a LiteLLM model")
    run.add_argument("--api-key-env", help="environment variable that holds the API key")
    run.add_argument("--dataset", help="'humaneval', a .jsonl/.parquet/saved-dataset path, or "
                     "hf://OWNER/NAME (a Hugging Face Hub dataset in the local cache, e.g. "
                     "hf://evalplus/humanevalplus)")
    run.add_argument("--format", type=dataset_format, metavar="FORMAT",
                     help="the dataset's format: humaneval, mbpp, evalplus or an installed plugin's "
                     "(default: the spec's dataset.format, else detected)")
    run.add_argument("--limit", type=int, help="only the first N problems")
    run.add_argument("--task-ids", type=comma_separated, help="comma-separated task ids")
    run.add_argument("--split", choices=["dev", "test", "all"],
                     help="held-out half: dev = even positions in the dataset's order, test = odd "
                     "(default: the spec's dataset.split, else all); applied before --task-ids and --limit")
    run.add_argument("--seeds", type=comma_separated_ints, help="comma-separated seeds")
    run.add_argument("--concurrency", type=int, help="problems solved at once")
    run.add_argument("--parallel-runs", type=int, metavar="N",
                     help="child runs (pipeline × seed) solved at once, e.g. for pipelines with memory, "
                     "which solve their problems one at a time (default: the spec's parallel_runs, else 1)")
    run.add_argument("--ray", metavar="ADDRESS",
                     help="solve on a Ray cluster: 'auto', host:6379 or ray://host:10001")
    run.add_argument("--request-timeout", type=request_timeout, metavar="S",
                     help="seconds one model request may take (default 600 local, 120 remote)")
    run.add_argument("--fresh", action="store_true", help="ignore earlier checkpoints")
    run.add_argument("--no-cache", action="store_true",
                     help="ask the model again for every request; its answers replace the cached ones")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--compare", action=argparse.BooleanOptionalAction, default=None,
        help="end with `critiquelab compare` on the run (default: when it has 2+ pipelines)",
    )
    run.add_argument("--prompts", help="exported prompts to load: a `critiquelab export` directory or its "
                     "program.json, or Prompt Registry URIs prompts:/NAME/VERSION (comma-separated)")
    run.add_argument("--strict", action="store_const", const=True, default=None,
                     help="refuse to report a run with unusable model replies (unparsed, no code, "
                     "fallbacks, cut at max_tokens, no token usage): exit 3 at the first; finished "
                     "problems are kept, so the run resumes")
    run.add_argument("--study", type=output_dir, metavar="DIR",
                     help="when the run ends, write its study (results as committed files) into DIR, "
                     "e.g. studies/NAME; needs --evidence")
    add_evidence_options(run, required=False)
    run.add_argument("--estimate", action="store_true",
                     help="print the expected LM calls, tokens and wall time per pipeline (from earlier runs "
                     "in this data directory, or shipped defaults) and exit: no model call, nothing written")


def _add_compare(commands: Any) -> None:
    compare = commands.add_parser("compare", help="compare pipelines: table, paired tests, plots, report")
    compare.add_argument("runs", nargs="+", help="a parent run id (all its pipeline runs) or run ids, or "
                         "one study folder (re-computed from its files alone)")
    compare.add_argument("--out", type=output_dir, help="report directory (default <data dir>/reports/<id>)")
    compare.add_argument("--bootstrap-seed", type=int, default=0,
                         help="seed of the paired bootstrap, 0 to 2**32-1 (default 0)")
    compare.add_argument("--resamples", type=int, default=9999,
                         help="bootstrap resamples, 99 to 1000000 (default 9999)")
    compare.add_argument("--no-log", action="store_true", help="do not attach the report to MLflow")
    compare.add_argument("--viewer-url", help="link the report's problems to a running 'critiquelab view' "
                         "at this URL, e.g. http://127.0.0.1:8470 (default: the compared runs' pages are "
                         "written beside the report, under viewer/, and open from disk)")


def _add_optimize(commands: Any) -> None:
    optimize = commands.add_parser("optimize", help="optimise a pipeline's prompts (YAML spec)")
    optimize.add_argument("spec", type=Path, help="e.g. experiments/optimize_critic_loop.yaml")
    optimize.add_argument("--fresh", action="store_true", help="ignore finished steps")
    optimize.add_argument("--no-cache", action="store_true",
                          help="ask the model again for every request; its answers replace the cached ones")


def _add_export(commands: Any) -> None:
    export = commands.add_parser("export", help="export an optimised program's prompts")
    export.add_argument("target", help="export directory / program.json, or an MLflow run id")
    export.add_argument(
        "--format", dest="formats", type=comma_separated, default=["json", "md", "txt"],
        help="comma-separated: json, md, txt, mlflow (default json,md,txt)",
    )
    export.add_argument("--out", type=output_dir, help="output directory (default <home>/exports/<name>)")
    export.add_argument("--prefix", type=prompt_prefix,
                        help="Prompt Registry name prefix (default critiquelab.<pipeline>)")


def _common_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """--home and --debug, accepted before the verb and after it (``default=SUPPRESS`` on the
    verbs, so a value given before the verb stands unless repeated after it)."""
    home_default, debug_default = (None, False) if default is None else (default, default)
    parser.add_argument("--home", type=data_home, default=home_default,
                        help="data directory (default $CRITIQUELAB_HOME or ./.critiquelab)")
    parser.add_argument("--debug", action="store_true", default=debug_default,
                        help="show tracebacks and library logs")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="critiquelab", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _common_options(parser, None)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(commands)
    _add_compare(commands)
    _add_export(commands)
    _add_optimize(commands)
    ui = commands.add_parser("ui", help="start the MLflow UI on the local store")
    ui.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1; 0.0.0.0 exposes the runs to the network)")
    ui.add_argument("--port", type=port, default=5000, help="port, 1 to 65535 (default 5000)")
    view = commands.add_parser("view", help="per-problem transcripts in a browser (127.0.0.1, read-only)")
    view.add_argument("run_id", nargs="?", help="a pipeline run or parent run id (default: all runs)")
    view.add_argument("--port", type=port, default=8470, help="port on 127.0.0.1, 1 to 65535 (default 8470)")
    view.add_argument("--out", type=output_dir,
                      help="write the pages as static files here instead of serving")
    models = commands.add_parser("models", help="bundled model files")
    models.add_argument("action", choices=["list", "fetch"])
    models.add_argument("name", nargs="?", default="local", help="'local', 'local-1.5b' or a key")
    pipelines = commands.add_parser("pipelines", help="list registered pipelines and their typed params")
    pipelines.add_argument("names", nargs="*", metavar="NAME",
                           help="only these: registered names or package.module:Name / file.py:Name "
                           "(default: every installed pipeline)")
    add_memory_parser(commands)
    add_rescore_parser(commands)
    add_study_parser(commands)
    for verb in commands.choices.values():
        _common_options(verb, argparse.SUPPRESS)
    return parser
