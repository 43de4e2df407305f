"""The error types the CLI turns into a single clear line (exit code 2 or 3), and how another
library's error becomes part of that line."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """How a ``critiquelab`` command ends: the one definition the CLI returns and the
    documentation's exit-code reference is generated from (:data:`EXIT_MEANINGS`)."""

    DONE = 0
    CHECK_FAILED = 1
    BAD_INPUT = 2
    SERVICE_FAILED = 3
    INTERRUPTED = 130
    STDOUT_CLOSED = 141


EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.DONE: "done",
    ExitCode.CHECK_FAILED: "a check found what it checks for: `critiquelab study tables --check` names each "
    "file whose tables differ from their studies",
    ExitCode.BAD_INPUT: "bad input (a UserError: spec, option, dataset, endpoint, store or "
    "data directory): one line naming the problem — the option, when the value came from one, else "
    "the spec file and field — before anything is written. A usage error of the parser ends so too",
    ExitCode.SERVICE_FAILED: "an external service (the model endpoint, a Chroma or MLflow server) "
    "failed mid-run after its bounded retries (a ServiceError): one line saying what failed; "
    "the runs are marked KILLED and the same command resumes them. Also `run --strict` (spec `strict: "
    "true`) refusing to report a run with a model reply its role could not use, a fallback, no code, a "
    "reply cut at `max_tokens` or no token usage, before that problem is checkpointed",
    ExitCode.INTERRUPTED: "Ctrl-C, SIGTERM or SIGHUP (the terminal closed): runs marked KILLED, model "
    "server stopped, pool flushed; the process ends within seconds even with a request in flight; the "
    "same command resumes",
    ExitCode.STDOUT_CLOSED: "standard output closed by its reader (`critiquelab pipelines | head -1`): "
    "the command ends quietly, as a command killed by SIGPIPE would",
}


class UserError(Exception):
    """Bad input from the user (config, dataset, endpoint): says what is wrong and what to do.

    The CLI prints ``str(error)`` on one line and exits with code 2, without a traceback.
    """


class ServiceError(Exception):
    """An external service (the model endpoint, a Chroma or MLflow server) failed mid-run, after
    its bounded retries. The CLI prints ``str(error)`` on one line and exits with code 3; the
    same command resumes the run (finished problems are checkpointed)."""


class FieldError(UserError):
    """A spec field's value refused when it is first used (at start-up, after the spec was read):
    ``field`` is the field's path (``model.api_key_env``), so that a value a command-line option
    set is blamed on that option (``--api-key-env X: …``) rather than on a spec that lacks it."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field, self.value, self.problem = field, value, problem
        super().__init__(f"{field} '{value}': {problem}")


def error_line(error: BaseException, *, limit: int = 300, last: bool = False) -> str:
    """``error``'s first (``last``: last) line of text, or its type's name, for a one-line
    report: at most ``limit`` characters, a longer line cut at a word and ended with "…", so
    a cut never reads like the message's own end."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    line = lines[-1] if last else lines[0]
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    at_word = cut.rfind(" ")
    return (cut[:at_word] if at_word > limit // 2 else cut).rstrip(" ,;:") + "…"
