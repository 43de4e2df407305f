"""What logging one MLflow trace per problem costs a run: the same run, traces off vs on.

The critic loop with execution feedback (the scripted loop of the tests: a wrong draft, a review,
a fix, a second review; 6–7 messages and 4 role calls per problem) runs through the runner against
a scripted endpoint that answers at once, the LM cache off, pool persistence off: with no model
time left, what remains is harness plus tracing, the hardest case for the target. Runs alternate
on/off after a discarded warm-up run; medians of ``--repeats``. Also prints the extra time per
problem as a share of a real critic-loop problem on the bundled model (``--problem-lm-s``).

    .venv/bin/python benchmarks/trace_overhead.py [--problems 40] [--repeats 5] [--problem-lm-s 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.eval.datasets import load_problems
from critiquelab.experiments.api import offline_defaults, run


def _spec(api_base: str, problems: int, traces: bool) -> dict:
    return {
        "name": "trace-overhead", "dataset": {"source": "humaneval", "limit": problems},
        "model": {"id": "openai/scripted", "api_base": api_base, "num_retries": 0}, "seeds": [0],
        "pipelines": [{"name": "critic_loop", "params": {"execution_feedback": True}}],
        "pool": {"persist": False}, "tracking": {"traces": traces},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5, help="on/off pairs")
    parser.add_argument("--problem-lm-s", type=float, default=15.0,
                        help="a real critic-loop problem's time on the bundled model")
    args = parser.parse_args()
    offline_defaults()
    scripts = critic_loop_scripts(load_problems())
    walls: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="trace-bench-") as tmp, \
            FakeOpenAIServer(role_responder(scripts)) as fake:

        def timed(traces: bool, name: str) -> float:
            start = time.perf_counter()
            run(_spec(fake.api_base, args.problems, traces), home=Path(tmp) / name, cache=False,
                progress=False, compare=False)
            return time.perf_counter() - start

        timed(False, "warmup")  # one-off imports and caches, whatever the setting
        for repeat in range(args.repeats):
            for traces in (True, False) if repeat % 2 == 0 else (False, True):
                walls[traces].append(timed(traces, f"run{repeat}-{traces}"))
                print(f"traces {'on ' if traces else 'off'}: {walls[traces][-1]:.2f} s", flush=True)
    on, off = statistics.median(walls[True]), statistics.median(walls[False])
    extra = (on - off) / args.problems
    print(f"critic loop, {args.problems} problems, instant scripted endpoint, medians of {args.repeats}: "
          f"on/off = {on / off:.3f} ({on / off - 1:+.1%}); extra per problem {1000 * extra:.1f} ms = "
          f"{extra / args.problem_lm_s:.2%} of a {args.problem_lm_s:g} s problem on the bundled model "
          "(target ≤ 2 %)")


if __name__ == "__main__":
    main()
