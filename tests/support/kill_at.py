"""Run ``critiquelab`` and kill it with SIGKILL at a chosen point, as ``kill -9`` would (or send
it another signal, as ``kill`` or a closing terminal would).

    python tests/support/kill_at.py MODULE:ATTR.PATH N [--match TEXT] [--before] [--signal TERM]
        -- CLI ARGS…

The N-th call of ``MODULE:ATTR.PATH`` (counting only calls whose arguments' repr contains
TEXT) kills the process right after it returns, or just before it runs with ``--before``. A
test thus stops a real run at an exact step — between two pipelines, while logging artifacts,
in the final comparison — with no hook in the library. With a signal the process may handle
(TERM, HUP, INT) the script exits with the command's own code. Exit code 99 says the point was
never reached (a test must not pass because nothing was stopped).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any


def install(target: str, occurrence: int, match: str, before: bool, signum: int) -> Callable[[], bool]:
    """Wrap the target; the returned function says whether the chosen call was reached."""
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
            os.kill(os.getpid(), signum)
        value = original(*args, **kwargs)
        if seen == occurrence and not before:
            os.kill(os.getpid(), signum)
        return value

    setattr(owner, name, wrapper)
    return lambda: seen >= occurrence


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("occurrence", type=int)
    parser.add_argument("--match", default="")
    parser.add_argument("--before", action="store_true")
    parser.add_argument("--signal", default="KILL", choices=["KILL", "TERM", "HUP", "INT"])
    split = sys.argv.index("--")
    args = parser.parse_args(sys.argv[1:split])
    reached = install(args.target, args.occurrence, args.match, args.before,
                      getattr(signal, f"SIG{args.signal}"))
    from critiquelab.experiments.cli.main import main as critiquelab

    code = critiquelab(sys.argv[split + 1 :])
    return code if reached() else 99


if __name__ == "__main__":
    sys.exit(main())
