"""The ``critiquelab`` command line, a thin layer over :mod:`critiquelab.experiments.api`: its entry point
and how a command ends.

Exit codes (defined once, :class:`critiquelab.core.errors.ExitCode`): 0 done; 2 bad input (one line naming it,
nothing written); 3 an external service (model endpoint, Chroma or MLflow server) failed mid-run
(one line; the same command resumes); 130 interrupted by Ctrl-C, SIGTERM or SIGHUP (the terminal
closed; the process ends within seconds, resumable; what fails while it stops is a warning line
before the stop's, not exit 2 or 3); 141 standard output closed by its reader (``| head``), quietly.
``--debug`` shows the traceback above that line, with the same exit code; any other traceback is a
bug.

:func:`main` is the ``critiquelab`` script and ``python -m critiquelab.experiments.cli``; the verbs and their
options are :mod:`critiquelab.experiments.cli.parser`, what each verb does
:mod:`critiquelab.experiments.cli.commands`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import sys
import threading
import traceback
from typing import Any, NoReturn

from critiquelab.core.errors import ExitCode, ServiceError, UserError
from critiquelab.experiments.cli.commands import HANDLERS
from critiquelab.experiments.cli.parser import build_parser

# After Ctrl-C, SIGTERM or SIGHUP the runner marks its runs, stops the model server and flushes the
# pool; whatever still hangs then (a model request in flight) must not keep the process alive.
STOP_GRACE_S = 4.0
# What stops a command: Ctrl-C, `kill`, and the terminal closing (SIGHUP) — all alike.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
INTERRUPTED = "critiquelab: interrupted; run the same command again to resume"
# Standard output closed by its reader (``critiquelab pipelines | head -1``): nothing more to say
# to anyone, so no message; the code a command killed by SIGPIPE has in a shell (128 + 13).
STDOUT_CLOSED = ExitCode.STDOUT_CLOSED


def _stop_on_signal(signum: int, frame: Any) -> None:
    """Ctrl-C, SIGTERM and SIGHUP: unwind (runs marked KILLED, model server stopped, pool
    flushed), and end the process after ``STOP_GRACE_S`` whatever is still in flight."""
    timer = threading.Timer(STOP_GRACE_S, _hard_exit, (ExitCode.INTERRUPTED, INTERRUPTED))
    timer.daemon = True
    timer.start()
    for sig in STOP_SIGNALS:  # a second Ctrl-C (or the hangup that follows one) must not break the unwinding
        signal.signal(sig, signal.SIG_IGN)
    _discard_closed_streams()  # a closed terminal: what the unwinding prints must not fail (EIO)
    raise KeyboardInterrupt


def _one_line(error: Exception) -> str:
    """Whatever a message quotes (a file name, a server's reply), it stays one line."""
    return " ".join(str(error).split())


def _hard_exit(code: int, message: str = "") -> NoReturn:
    """Exit without joining worker threads that are blocked in a model request. ``atexit`` does
    not run, so the sandbox's checkers, which it would have stopped, are killed here."""
    from critiquelab.eval.sandbox import pool as sandbox_pool

    if message:
        _say(message)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    with contextlib.suppress(Exception):  # a lane in use by a thread we abandon: exit regardless
        sandbox_pool.shutdown(graceful=False)
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at interpreter exit, where a closed pipe could not be handled
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        _discard_stdout()
        return STDOUT_CLOSED


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error, already printed as one line (2)
        return int(exc.code or 0)
    from critiquelab.experiments.api import offline_defaults

    offline_defaults()
    if args.home:
        os.environ["CRITIQUELAB_HOME"] = str(args.home)
    elif os.environ.get("CRITIQUELAB_HOME"):  # checked as --home is, before anything is written
        from critiquelab.experiments.paths import unwritable_dir

        problem = unwritable_dir(os.environ["CRITIQUELAB_HOME"])
        if problem is not None:
            _say(f"critiquelab: error: $CRITIQUELAB_HOME: {' '.join(problem.split())}")
            return ExitCode.BAD_INPUT
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING, format="%(message)s")
    if not args.debug:  # its retries before an unreachable server is reported are not the user's news
        logging.getLogger("urllib3").setLevel(logging.ERROR)
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:
        before = {sig: signal.signal(sig, _stop_on_signal) for sig in STOP_SIGNALS}
    try:
        return _handle(args, argv)
    finally:
        if in_main_thread:  # a signal during shutdown (flushing, library atexit hooks) ends quietly too
            for sig, handler in before.items():
                signal.signal(sig, _stop_while_shutting_down if argv is None else handler)


def _closed(stream: Any, unknown: bool = True) -> bool:
    """Whether ``stream`` is a pipe whose reader has gone (``… | head -1``) or a terminal that
    hung up; ``unknown`` where poll() cannot say (not a file descriptor, not POSIX)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return unknown
    if not hasattr(select, "poll"):
        return unknown
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _stdout_closed() -> bool:
    """Standard output's reader gone, as opposed to a broken pipe of the command's own, which
    stays a bug with its traceback."""
    return _closed(sys.stdout, unknown=False)


def _discard(stream: Any) -> None:
    """What is still buffered for the closed ``stream`` goes nowhere, so a later write or the
    interpreter's own flush at exit does not fail again (the Python documentation's recipe for
    SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _discard_stdout() -> None:
    _discard(sys.stdout)


def _discard_closed_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        if _closed(stream, unknown=False):
            with contextlib.suppress(OSError, ValueError):
                _discard(stream)


def _say(line: str) -> None:
    """One line on stderr, if anyone can still read it (a terminal that hung up cannot)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _stop_while_shutting_down(signum: int, frame: Any) -> None:
    _hard_exit(ExitCode.INTERRUPTED, "critiquelab: interrupted while shutting down")


def _handle(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run the command; every way it can end is one line and an exit code (see module docstring)."""
    try:
        return HANDLERS[args.command](args)
    except (UserError, ServiceError) as exc:
        if args.debug:  # the traceback, then the line and the code a script checks, as without it
            traceback.print_exc()
        if _raised_while_stopping(exc):
            # The stop's unwinding (marking runs, stopping the model server, flushing the pool)
            # failed too, say on a message store that had died unnoticed: worth a line, but the
            # command was stopped, and that is how it ends (the stop's line last, exit 130).
            _say(f"critiquelab: warning: while stopping: {_one_line(exc)}")
            return _stopped(argv)
        if isinstance(exc, UserError):
            print(f"critiquelab: error: {_one_line(exc)}", file=sys.stderr)
            return ExitCode.BAD_INPUT
        print(f"critiquelab: error: {_one_line(exc)}; run the same command again to resume",
              file=sys.stderr)
        if argv is None:  # the process is ours: the unwinding (runs marked, model server stopped,
            # pool flushed) is done; interpreter shutdown could still hang or print tracebacks
            # in the finalisers of the model client's connections that the failure left open
            _hard_exit(ExitCode.SERVICE_FAILED)
        return ExitCode.SERVICE_FAILED
    except KeyboardInterrupt:
        return _stopped(argv)


def _stopped(argv: list[str] | None) -> int:
    _say(INTERRUPTED)
    if argv is None:  # the process is ours (not a test calling main): leave at once
        _hard_exit(ExitCode.INTERRUPTED)
    return ExitCode.INTERRUPTED


def _raised_while_stopping(error: BaseException) -> bool:
    """Whether ``error`` was raised while a stop (Ctrl-C, SIGTERM, SIGHUP: a KeyboardInterrupt)
    was unwinding: the interrupt is then in its chain of ``__context__``, even where the error
    was raised ``from None``."""
    seen: set[int] = set()
    context = error.__context__
    while context is not None and id(context) not in seen:
        if isinstance(context, KeyboardInterrupt):
            return True
        seen.add(id(context))
        context = context.__context__
    return False

