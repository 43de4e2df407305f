"""The one error type the CLI turns into a single clear line and exit code 2."""

from __future__ import annotations


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
