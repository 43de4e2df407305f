"""What each verb of ``critiquelab`` does: a call of :mod:`critiquelab.experiments.api` (or of the module the
verb is about) and what it prints. Anything a command needs is imported when it runs, so that
``--help`` stays quick."""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from critiquelab.core.errors import UserError
from critiquelab.experiments.cli.memory import cmd_memory
from critiquelab.experiments.cli.rescore import cmd_rescore
from critiquelab.experiments.cli.study import cmd_study

if TYPE_CHECKING:
    from critiquelab.experiments.spec.overrides import RunOverrides


def _overrides(args: argparse.Namespace) -> RunOverrides:
    """The run options that replace spec values (each is the option of the same name)."""
    from critiquelab.experiments.spec.overrides import RunOverrides

    return RunOverrides(**{name: getattr(args, name) for name in RunOverrides.model_fields})


def _cmd_run(args: argparse.Namespace) -> int:
    from critiquelab.experiments.api import run

    if args.estimate:
        return _cmd_estimate(args)
    if args.study is not None:  # refused before the run, not after hours of it
        from critiquelab.experiments.studies.write import check_destination

        if args.evidence is None:
            raise UserError("--study needs --evidence held_out|in_sample: what a reader is told beside "
                            "its figures")
        check_destination(args.study, replace=False)
    result = run(
        args.spec, overrides=_overrides(args), home=args.home, fresh=args.fresh, cache=not args.no_cache,
        progress=not args.no_progress, compare=args.compare,
    )
    print(result.summary().drop(columns=["run_id"]).to_string(index=False))
    for warning in result.warnings:
        print(f"critiquelab: warning: {warning}", file=sys.stderr)
    print(f"\nMLflow parent run {result.parent_run_id} (experiment {result.experiment_id}); "
          "see it with: critiquelab ui")
    if result.comparison is not None:  # its notices repeat the runs' warnings, printed just above
        _print_notices([n for n in result.comparison.notices if n not in result.warnings])
        print(f"\n{result.comparison.markdown}\nReport: {result.comparison.files['html']}")
    if args.study is not None:
        from critiquelab.experiments.api import load_experiment
        from critiquelab.experiments.studies.write import write_study

        # From the store the run logged to: a spec's tracking server, not the local one.
        tracking = load_experiment(args.spec, _overrides(args)).tracking.uri
        folder = write_study(result.parent_run_id, args.study, evidence=args.evidence, tuned_on=args.tuned_on,
                             notes=args.note, home=args.home, tracking=tracking)
        print(f"study written to {folder} (commit it; `critiquelab compare {folder}` re-computes it)")
    return 0


def _cmd_estimate(args: argparse.Namespace) -> int:
    from critiquelab.experiments.api import estimate

    result = estimate(args.spec, overrides=_overrides(args), home=args.home, fresh=args.fresh)
    print(result.table())
    return 0


def _print_notices(notices: list[str]) -> None:
    for notice in notices:
        print(f"critiquelab: note: {notice}", file=sys.stderr)


def _cmd_compare(args: argparse.Namespace) -> int:
    from critiquelab.eval.statistics import check_bootstrap_options
    from critiquelab.experiments.compare.runs import compare_runs
    from critiquelab.experiments.paths import data_dir as default_data_dir
    from critiquelab.experiments.studies.read import is_study, load_study

    # Checked here too so the message names the flags rather than compare_runs' parameters.
    check_bootstrap_options(
        args.resamples, args.bootstrap_seed, resamples_name="--resamples", seed_name="--bootstrap-seed"
    )
    if args.viewer_url is not None:
        from critiquelab.experiments.viewer.server import check_viewer_url

        check_viewer_url(args.viewer_url, "--viewer-url")
    if len(args.runs) == 1 and is_study(args.runs[0]):  # from the study's files: nothing to log
        out = args.out or (args.home or default_data_dir()) / "reports" / f"study-{Path(args.runs[0]).name}"
        result = load_study(args.runs[0]).compare(out, bootstrap_seed=args.bootstrap_seed,
                                                  n_resamples=args.resamples)
        _print_notices(result.notices)
        print(result.markdown)
        print(f"Report: {result.files['html']}")
        return 0
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
    from critiquelab.experiments.api import optimize

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
    from critiquelab.experiments.api import export

    result = export(args.target, formats=args.formats, out=args.out, home=args.home, prefix=args.prefix)
    for path in result["files"]:
        print(path)
    for name, version in result.get("prompts", {}).items():
        print(f"MLflow prompt {name} version {version}")
    for notice in result.get("notices", []):  # a plain run's prompts not quite as recorded
        print(f"critiquelab: warning: {notice}", file=sys.stderr)
    return 0


def _cmd_ui(args: argparse.Namespace) -> int:
    from critiquelab.experiments.paths import data_dir
    from critiquelab.experiments.tracking.local_store import check_writable_store
    from critiquelab.experiments.tracking.store import is_server, tracking_uri

    home = args.home or data_dir()
    if is_server(tracking_uri(home)):  # a team's server has its own UI
        print(f"runs are logged to the MLflow tracking server {tracking_uri(home)}: open it in a browser")
        return 0
    check_writable_store(tracking_uri(home))  # the UI's server would fail on it after printing its URL
    with socket.socket() as probe:  # MLflow would print the URL, then fail on a taken port
        try:
            probe.bind((args.host, args.port))
        except OSError as exc:
            # A name that does not resolve, or an address not on this machine, is the host's fault.
            host_at_fault = isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
            raise UserError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}; pick another "
                            f"{'--host' if host_at_fault else '--port'}") from exc
    home.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", tracking_uri(home),
               "--host", args.host, "--port", str(args.port)]
    print(f"MLflow UI on http://{args.host}:{args.port} (store {home})", flush=True)
    os.execv(sys.executable, command)
    return 0  # not reached


def _cmd_view(args: argparse.Namespace) -> int:
    from critiquelab.experiments.paths import data_dir
    from critiquelab.experiments.tracking.store import tracking_uri
    from critiquelab.experiments.viewer.server import HOST, export, make_server, open_viewer

    home = args.home or data_dir()
    viewer, first = open_viewer(tracking_uri(home), args.run_id)
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
    from critiquelab.experiments.paths import model_cache_dir
    from critiquelab.experiments.serving.model_files import BUNDLED_MODELS, ensure_model_file, resolve_bundled

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
    from critiquelab.experiments.api import list_pipelines
    from critiquelab.experiments.cli.pipelines_listing import render_pipelines

    print(render_pipelines(list_pipelines(args.names or None), shutil.get_terminal_size().columns))
    return 0


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": _cmd_run, "compare": _cmd_compare, "export": _cmd_export, "optimize": _cmd_optimize,
    "ui": _cmd_ui, "view": _cmd_view, "models": _cmd_models,
    "pipelines": _cmd_pipelines, "memory": cmd_memory, "rescore": cmd_rescore,
    "study": cmd_study,
}
