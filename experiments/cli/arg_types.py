"""Argument types of the command line that refuse a bad value before anything runs: argparse
turns the ``ArgumentTypeError`` into one line and exit code 2 (see ``critiquelab.experiments.cli.parser``)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

from critiquelab.core.lookup import user_path
from critiquelab.experiments.paths import unwritable_dir


def int_between(low: int, high: int, what: str = "a whole number") -> Callable[[str], int]:
    """An argument type: an integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from exc
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high}, got {value}")
        return value

    return parse


# A TCP port (a larger one overflowed deep in the socket layer).
port = int_between(1, 65535, "a port number")


def comma_separated(text: str) -> list[str]:
    """``A,B`` as ``[A, B]``; an empty item (``A,,B``, a trailing comma) is refused, not dropped."""
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got '{text}'")
    if not all(parts):
        raise argparse.ArgumentTypeError(f"an empty item in '{text}' (two commas, or one at an end)")
    return parts


def dataset_format(text: str) -> str:
    """``--format``: an installed dataset format (critiquelab's, or a plugin's: critiquelab.eval.formats)."""
    from critiquelab.core.errors import UserError
    from critiquelab.eval.formats import get_format

    try:
        return get_format(text).name
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def comma_separated_ints(text: str) -> list[int]:
    try:
        return [int(part) for part in comma_separated(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from exc


def request_timeout(text: str) -> float:
    """``--request-timeout``: seconds within the range of the spec field it replaces
    (``model.timeout_s``), refused with the text as typed (``1e400``, not ``inf``)."""
    import math

    from critiquelab.experiments.spec.experiment import ModelSpec

    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got '{text}'") from exc
    bounds = {name: getattr(rule, name) for rule in ModelSpec.model_fields["timeout_s"].metadata
              for name in ("gt", "ge", "lt", "le") if getattr(rule, name, None) is not None}
    low = bounds.get("gt", bounds.get("ge", -math.inf))
    high = bounds.get("le", bounds.get("lt", math.inf))
    inside = ((value > low if "gt" in bounds else value >= low)
              and (value <= high if "le" in bounds else value < high))
    if not math.isfinite(value) or not inside:
        raise argparse.ArgumentTypeError(
            f"must be {'above' if 'gt' in bounds else 'at least'} {low:g} and "
            f"{'at most' if 'le' in bounds else 'below'} {high:g} seconds, got '{text}'")
    return value


def output_dir(text: str) -> Path:
    """A directory to write into: an existing directory that takes new entries, or one that can
    be created — tried here (and undone, see :func:`critiquelab.experiments.paths.unwritable_dir`), so a bad
    one is refused before any work is done, and nothing is left behind."""
    problem = unwritable_dir(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return user_path(text)


def data_home(text: str) -> Path:
    """The data directory: an existing directory or one that can be created (see
    :func:`output_dir`), refused up front whichever verb it is given to."""
    return output_dir(text)


PROMPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def prompt_prefix(text: str) -> str:
    """The start of MLflow Prompt Registry names: letters, digits, '.', '_' and '-'."""
    if not PROMPT_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"'{text}' cannot start a prompt name (letters, digits, '.', '_', '-')"
        )
    return text
