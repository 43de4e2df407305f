"""The one error type the CLI turns into a single clear line and exit code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (config, dataset, endpoint): says what is wrong and what to do.

    The CLI prints ``str(error)`` on one line and exits with code 2, without a traceback.
    """
