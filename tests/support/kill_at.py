"""Run ``critiquelab`` and kill it with SIGKILL at a chosen point, as ``kill -9`` would.

    python tests/support/kill_at.py MODULE:ATTR.PATH N [--match TEXT] [--before] -- CLI ARGS…

The N-th call of ``MODULE:ATTR.PATH`` (counting only calls whose arguments' repr contains
TEXT) kills the process right after it returns, or just before it runs with ``--before``. A
test thus stops a real run at an exact step — between two pipelines, while logging artifacts,
in the final comparison — with no hook in the library. Exit code 99 says the point was never
reached (a test must not pass because nothing was killed).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import signal
import sys
from typing import Any


def install(target: str, occurrence: int, match: str, before: bool) -> None:
    module_name, path = target.split(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    seen = 0

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal seen
        if match in repr(args) + repr(kwargs):
            seen += 1
        if seen == occurrence and before:
            os.kill(os.getpid(), signal.SIGKILL)
        value = original(*args, **kwargs)
        if seen == occurrence:
            os.kill(os.getpid(), signal.SIGKILL)
        return value

    setattr(owner, name, wrapper)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("occurrence", type=int)
    parser.add_argument("--match", default="")
    parser.add_argument("--before", action="store_true")
    split = sys.argv.index("--")
    args = parser.parse_args(sys.argv[1:split])
    install(args.target, args.occurrence, args.match, args.before)
    from experiments.cli import main as critiquelab

    critiquelab(sys.argv[split + 1 :])
    return 99


if __name__ == "__main__":
    sys.exit(main())
