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
