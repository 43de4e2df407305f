"""``critiquelab``: a thin command line over :mod:`experiments.api`.

Exit codes: 0 done; 2 bad input (one line naming it, nothing written); 3 an external service
(model endpoint, Chroma or MLflow server) failed mid-run (one line; the same command resumes);
130 interrupted by Ctrl-C or SIGTERM (the process ends within seconds, resumable). ``--debug``
shows tracebacks; any other traceback is a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from core.errors import ServiceError, UserError
from experiments.cli_args import data_home, output_dir, port, prompt_prefix
from experiments.memory_cli import add_memory_parser, cmd_memory
from experiments.rescore_cli import add_rescore_parser, cmd_rescore

if TYPE_CHECKING:  # imported when a command needs it, so that `--help` stays quick
    from experiments.spec.overrides import RunOverrides

# After Ctrl-C or SIGTERM the runner marks its runs, stops the model server and flushes the
# pool; whatever still hangs then (a model request in flight) must not keep the process alive.
STOP_GRACE_S = 4.0
INTERRUPTED = "critiquelab: interrupted; run the same command again to resume"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2) like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"critiquelab: error: {message} (see '{self.prog} --help')\n")


def _csv(text: str) -> list[str]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got '{text}'")
    return parts


def _int_csv(text: str) -> list[int]:
    try:
        return [int(part) for part in _csv(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from exc


def _add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="run an experiment spec (YAML)")
    run.add_argument("spec", type=Path, help="experiment YAML, e.g. experiments/baseline.yaml")
    run.add_argument("--model", help="'local' (default), 'local-1.5b', or a LiteLLM model string")
    run.add_argument("--api-base", help="endpoint URL for a LiteLLM model")
    run.add_argument("--api-key-env", help="environment variable that holds the API key")
    run.add_argument("--dataset", help="'humaneval', a .jsonl/.parquet/saved-dataset path, or "
                     "hf://OWNER/NAME (a Hugging Face Hub dataset in the local cache, e.g. "
                     "hf://evalplus/humanevalplus)")
    run.add_argument("--format", choices=["humaneval", "mbpp", "evalplus"],
                     help="the dataset's format (default: the spec's dataset.format, else detected)")
    run.add_argument("--limit", type=int, help="only the first N problems")
    run.add_argument("--task-ids", type=_csv, help="comma-separated task ids")
    run.add_argument("--split", choices=["dev", "test", "all"],
                     help="held-out half: dev = even positions in the dataset's order, test = odd "
                     "(default: the spec's dataset.split, else all); applied before --task-ids and --limit")
    run.add_argument("--seeds", type=_int_csv, help="comma-separated seeds")
    run.add_argument("--concurrency", type=int, help="problems solved at once")
    run.add_argument("--ray", metavar="ADDRESS",
                     help="solve on a Ray cluster: 'auto', host:6379 or ray://host:10001")
    run.add_argument("--request-timeout", type=float, metavar="S",
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
    run.add_argument("--estimate", action="store_true",
                     help="print the expected LM calls, tokens and wall time per pipeline (from earlier runs "
                     "in this data directory, or shipped defaults) and exit: no model call, nothing written")


def _add_compare(commands: Any) -> None:
    compare = commands.add_parser("compare", help="compare pipelines: table, paired tests, plots, report")
    compare.add_argument("runs", nargs="+", help="a parent run id (all its pipeline runs) or run ids")
    compare.add_argument("--out", type=output_dir, help="report directory (default <data dir>/reports/<id>)")
    compare.add_argument("--bootstrap-seed", type=int, default=0,
                         help="seed of the paired bootstrap, 0 to 2**32-1 (default 0)")
    compare.add_argument("--resamples", type=int, default=9999,
                         help="bootstrap resamples, 99 to 1000000 (default 9999)")
    compare.add_argument("--no-log", action="store_true", help="do not attach the report to MLflow")
    compare.add_argument("--viewer-url", help="where the report links discordant problems: the root of "
                         "a `critiquelab view` (default http://127.0.0.1:8470)")


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
        "--format", dest="formats", type=_csv, default=["json", "md", "txt"],
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
    parser = _Parser(prog="critiquelab", description=__doc__.splitlines()[0])
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
    commands.add_parser("pipelines", help="list registered pipelines and their typed params")
    add_memory_parser(commands)
    add_rescore_parser(commands)
    for verb in commands.choices.values():
        _common_options(verb, argparse.SUPPRESS)
    return parser


def _overrides(args: argparse.Namespace) -> RunOverrides:
    """The run options that replace spec values (each is the option of the same name)."""
    from experiments.spec.overrides import RunOverrides

    return RunOverrides(**{name: getattr(args, name) for name in RunOverrides.model_fields})


def _cmd_run(args: argparse.Namespace) -> int:
    from experiments.api import run

    if args.estimate:
        return _cmd_estimate(args)
    result = run(
        args.spec, overrides=_overrides(args), home=args.home, fresh=args.fresh, cache=not args.no_cache,
        progress=not args.no_progress, compare=args.compare,
    )
    print(result.summary().drop(columns=["run_id"]).to_string(index=False))
    for warning in result.warnings:
        print(f"critiquelab: warning: {warning}", file=sys.stderr)
    print(f"\nMLflow parent run {result.parent_run_id} (experiment {result.experiment_id}); "
          "see it with: critiquelab ui")
    if result.comparison is not None:
        _print_notices(result.comparison.notices)
        print(f"\n{result.comparison.markdown}\nReport: {result.comparison.files['html']}")
    return 0


def _cmd_estimate(args: argparse.Namespace) -> int:
    from experiments.api import estimate

    result = estimate(args.spec, overrides=_overrides(args), home=args.home, fresh=args.fresh)
    print(result.table())
    return 0


def _print_notices(notices: list[str]) -> None:
    for notice in notices:
        print(f"critiquelab: note: {notice}", file=sys.stderr)


def _cmd_compare(args: argparse.Namespace) -> int:
    from eval.statistics import check_bootstrap_options
    from experiments.compare import compare_runs

    # Checked here too so the message names the flags rather than compare_runs' parameters.
    check_bootstrap_options(
        args.resamples, args.bootstrap_seed, resamples_name="--resamples", seed_name="--bootstrap-seed"
    )
    if args.viewer_url is not None:
        from experiments.viewer.server import check_viewer_url

        check_viewer_url(args.viewer_url, "--viewer-url")
    result = compare_runs(
        args.runs, home=args.home, out=args.out, log=not args.no_log,
        bootstrap_seed=args.bootstrap_seed, n_resamples=args.resamples, viewer_url=args.viewer_url,
    )
    _print_notices(result.notices)
    print(result.markdown)
    logged = f"; logged to MLflow run {result.logged_run_id}" if result.logged_run_id else ""
    print(f"Report: {result.files['html']}{logged}")
    return 0


def _cmd_optimize(args: argparse.Namespace) -> int:
    from experiments.api import optimize

    result = optimize(args.spec, home=args.home, fresh=args.fresh, cache=not args.no_cache,
                      log=lambda line: print(line, file=sys.stderr, flush=True), progress=True)
    gate, refine = result.steps["gate"], result.steps.get("refine")
    print(f"validation pass@1: baseline {gate['baseline_val']:.3f}, compiled {gate['compiled_val']:.3f}; "
          f"kept {gate['kept']} ({gate['reason']})")
    if refine is not None:
        print(f"refine ({refine['val_before']:.3f} -> {refine['val_after']:.3f}): "
              f"{'kept' if refine['kept'] else 'not kept'} ({refine['reason']})")
    test = result.steps["test"]
    print(f"held-out test pass@1: unoptimised {test['unoptimised_pass_at_1']:.3f}, "
          f"kept ({result.kept}) {test['pass_at_1']:.3f}; every candidate, paired:\n\n{test['comparison']}")
    print(f"MLflow parent run {result.parent_run_id}")
    if result.kept_run_id is not None:
        print(f"export the kept ({result.kept}) program with: critiquelab export {result.kept_run_id}")
    elif result.rejected_run_ids:
        rejected = "; ".join(f"{name}: critiquelab export {run}"
                             for name, run in result.rejected_run_ids.items())
        print(f"kept the unoptimised pipeline: nothing optimised to export (rejected candidates, should you "
              f"want one anyway: {rejected})")
    else:
        print("kept the unoptimised pipeline: nothing optimised to export")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from experiments.api import export

    result = export(args.target, formats=args.formats, out=args.out, home=args.home, prefix=args.prefix)
    for path in result["files"]:
        print(path)
    for name, version in result.get("prompts", {}).items():
        print(f"MLflow prompt {name} version {version}")
    return 0


def _cmd_ui(args: argparse.Namespace) -> int:
    from experiments.paths import data_dir
    from experiments.tracking.store import is_server, tracking_uri

    home = args.home or data_dir()
    if is_server(tracking_uri(home)):  # a team's server has its own UI
        print(f"runs are logged to the MLflow tracking server {tracking_uri(home)}: open it in a browser")
        return 0
    with socket.socket() as probe:  # MLflow would print the URL, then fail on a taken port
        try:
            probe.bind((args.host, args.port))
        except OSError as exc:
            raise UserError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}; pick --port") from exc
    home.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", tracking_uri(home),
               "--host", args.host, "--port", str(args.port)]
    print(f"MLflow UI on http://{args.host}:{args.port} (store {home})", flush=True)
    os.execv(sys.executable, command)
    return 0  # not reached


def _cmd_view(args: argparse.Namespace) -> int:
    from experiments.paths import data_dir
    from experiments.tracking.store import tracking_uri
    from experiments.viewer.server import HOST, export, make_server, open_viewer

    home = args.home or data_dir()
    viewer, first = open_viewer(home, tracking_uri(home), args.run_id)
    if args.out is not None:
        count = export(viewer, args.out, args.run_id)
        print(f"wrote {count} pages to {args.out}; open {args.out / first.lstrip('/')}")
        return 0
    server = make_server(viewer, args.port)
    print(f"critiquelab view on http://{HOST}:{args.port}{first} (store {home}); Ctrl-C stops it", flush=True)
    with server:
        server.serve_forever()
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from experiments.paths import model_cache_dir
    from experiments.serving.model_files import BUNDLED_MODELS, ensure_model_file, resolve_bundled

    if args.action == "list":
        for bundled in BUNDLED_MODELS.values():
            path = model_cache_dir() / "models" / bundled.filename
            state = "assembled" if path.exists() else "not assembled"
            print(f"{bundled.key}  {bundled.size / 2**20:,.0f} MiB  {state}  {bundled.description}")
        return 0
    model = resolve_bundled(args.name)
    if model is None:
        raise UserError(f"unknown bundled model '{args.name}'; see 'critiquelab models list'")
    print(ensure_model_file(model))
    return 0


def _cmd_pipelines(args: argparse.Namespace) -> int:
    from experiments.api import list_pipelines
    from experiments.pipelines_listing import render_pipelines

    print(render_pipelines(list_pipelines(), shutil.get_terminal_size().columns))
    return 0


HANDLERS = {
    "run": _cmd_run, "compare": _cmd_compare, "export": _cmd_export, "optimize": _cmd_optimize,
    "ui": _cmd_ui, "view": _cmd_view, "models": _cmd_models,
    "pipelines": _cmd_pipelines, "memory": cmd_memory, "rescore": cmd_rescore,
}


def _stop_on_signal(signum: int, frame: Any) -> None:
    """Ctrl-C and SIGTERM: unwind (runs marked KILLED, model server stopped, pool flushed), and
    end the process after ``STOP_GRACE_S`` whatever is still in flight."""
    timer = threading.Timer(STOP_GRACE_S, _hard_exit, (130, INTERRUPTED))
    timer.daemon = True
    timer.start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not break the unwinding
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _one_line(error: Exception) -> str:
    """Whatever a message quotes (a file name, a server's reply), it stays one line."""
    return " ".join(str(error).split())


def _hard_exit(code: int, message: str = "") -> NoReturn:
    """Exit without joining worker threads that are blocked in a model request."""
    if message:
        print(message, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error, already printed as one line (2)
        return int(exc.code or 0)
    from experiments.api import offline_defaults

    offline_defaults()
    if args.home:
        os.environ["CRITIQUELAB_HOME"] = str(args.home)
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING, format="%(message)s")
    if not args.debug:  # its retries before an unreachable server is reported are not the user's news
        logging.getLogger("urllib3").setLevel(logging.ERROR)
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:
        before = {sig: signal.signal(sig, _stop_on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _handle(args, argv)
    finally:
        if in_main_thread:  # a signal during shutdown (flushing, library atexit hooks) ends quietly too
            for sig, handler in before.items():
                signal.signal(sig, _stop_while_shutting_down if argv is None else handler)


def _stop_while_shutting_down(signum: int, frame: Any) -> None:
    _hard_exit(130, "critiquelab: interrupted while shutting down")


def _handle(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run the command; every way it can end is one line and an exit code (see module docstring)."""
    try:
        return HANDLERS[args.command](args)
    except UserError as exc:
        if args.debug:
            raise
        print(f"critiquelab: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except ServiceError as exc:
        if args.debug:
            raise
        print(f"critiquelab: error: {_one_line(exc)}; run the same command again to resume",
              file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        if argv is None:  # the process is ours (not a test calling main): leave at once
            _hard_exit(130)
        return 130


if __name__ == "__main__":
    sys.exit(main())
