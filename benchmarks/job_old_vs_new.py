"""The README's main job under two servings, side by side in one run on the bundled model.

*old* is one of:

- ``--old shipped`` (default): the job exactly as `experiments/debate_vs_critic.yaml` configures
  it (no speculative decoding: the shipped default);
- ``--old llama-cpp-python``: llama-cpp-python's server, one problem at a time, a problem's agents
  one call at a time (how the job ran before llama-server).

*new* is one of:

- ``--new ngram`` (default): the same job with ``model.speculative: ngram`` (issue #35);
- ``--new shipped``: the job as configured (to measure it against ``--old llama-cpp-python``).

Both start from an empty LM cache, each in its own temporary data directory. The problems are run
in chunks of ``--chunk`` problems, old and new alternating (old first in odd chunks, new first in
even ones), so a machine whose load changes over the run slows both alike. Prints per pipeline:
wall time old / new and their ratio, problems passed, problems whose outcome differs, and the
share of prompt tokens llama-server reused from its slots' caches (old / new).

    .venv/bin/python benchmarks/job_old_vs_new.py [--old shipped|llama-cpp-python]
        [--new ngram|shipped] [--limit 8] [--chunk 4] [--start 0]

Vote's budget comes from debate's tokens in the same chunk, in both configurations alike.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.eval.datasets import load_problems
from critiquelab.experiments.api import RunOverrides, offline_defaults, run
from critiquelab.experiments.spec.files import load_yaml
from critiquelab.experiments.tracking.store import tracking_uri

SPEC = Path(__file__).resolve().parents[1] / "experiments" / "debate_vs_critic.yaml"


def one_at_a_time(spec: dict[str, Any]) -> dict[str, Any]:
    """The same experiment served the oldest way: llama-cpp-python, one request at a time."""
    old = {**spec, "concurrency": 1, "model": {**spec["model"], "server": "llama-cpp-python"}}
    one_agent = ("debate", "vote")
    old["pipelines"] = [
        {**p, "params": {**p.get("params", {}), "parallel_agents": 1}} if p["name"] in one_agent else p
        for p in spec["pipelines"]
    ]
    return old


def ngram(spec: dict[str, Any]) -> dict[str, Any]:
    """The same experiment with llama-server's n-gram speculative decoding."""
    return {**spec, "model": {**spec["model"], "speculative": "ngram"}}


OLD = {"shipped": lambda spec: spec, "llama-cpp-python": one_at_a_time}
NEW = {"ngram": ngram, "shipped": lambda spec: spec}


def _pipeline_walls(home: Path, result: Any) -> dict[str, float]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri(home, None))
    walls = {}
    for child in result.children:
        info = client.get_run(child.run_id).info
        walls[child.pipeline] = (info.end_time - info.start_time) / 1000
    return walls


def print_table(pipelines: list[str], done: int, chunk: int, loads: list[float],
                wall: dict[str, dict[str, float]], passed: dict[tuple[str, str], dict[str, bool]],
                reused: dict[tuple[str, str], list[float]]) -> None:
    """The figures so far; printed after every chunk, so a run stopped early still has them."""
    print(f"{done} HumanEval problems, chunks of {chunk}; 1-min load average at each "
          f"start: {min(loads):.1f}–{max(loads):.1f}", flush=True)
    print(f"{'pipeline':<14}{'old s':>9}{'new s':>9}{'old/new':>9}{'pass old':>10}{'pass new':>10}"
          f"{'differ':>8}{'reused old / new':>18}")
    for pipeline in [*pipelines, "(whole job)"]:
        old_s, new_s = wall["old"][pipeline], wall["new"][pipeline]
        outcome_old, outcome_new = passed.get(("old", pipeline), {}), passed.get(("new", pipeline), {})
        differ = sum(outcome_old.get(t) != outcome_new.get(t) for t in outcome_old)
        shares = [f"{r[0] / r[1]:.0%}" if r[1] else "-"
                  for r in (reused[("old", pipeline)], reused[("new", pipeline)])]
        print(f"{pipeline:<14}{old_s:>9.0f}{new_s:>9.0f}{old_s / new_s:>9.2f}"
              + (f"{sum(outcome_old.values()):>10}{sum(outcome_new.values()):>10}{differ:>8}"
                 if outcome_old else f"{'':>28}")
              + f"{' / '.join(shares):>18}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=8, help="first N HumanEval problems")
    parser.add_argument("--chunk", type=int, default=4, help="problems per alternation")
    parser.add_argument("--start", type=int, default=0, help="skip the first N HumanEval problems")
    parser.add_argument("--old", choices=sorted(OLD), default="shipped", help="what 'old' serving is")
    parser.add_argument("--new", choices=sorted(NEW), default="ngram", help="what 'new' serving is")
    args = parser.parse_args()
    offline_defaults()
    if args.old == args.new:
        parser.error("--old and --new are the same serving")
    shipped = load_yaml(SPEC)
    configs = {"old": {**OLD[args.old](shipped), "name": f"{shipped['name']}_old"},
               "new": {**NEW[args.new](shipped), "name": f"{shipped['name']}_new"}}
    task_ids = [p.task_id for p in load_problems("humaneval", limit=args.start + args.limit)][args.start:]
    chunks = [task_ids[i:i + args.chunk] for i in range(0, len(task_ids), args.chunk)]
    wall: dict[str, dict[str, float]] = {name: defaultdict(float) for name in configs}
    passed: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    reused: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    loads = []
    with tempfile.TemporaryDirectory(prefix="job-old-vs-new-") as scratch:
        for index, chunk in enumerate(chunks):
            order = ["old", "new"] if index % 2 == 0 else ["new", "old"]
            for name in order:
                home = Path(scratch) / name
                loads.append(os.getloadavg()[0])
                start = time.monotonic()
                result = run(configs[name], overrides=RunOverrides(task_ids=chunk), home=home, progress=False,
                             compare=False)
                total = time.monotonic() - start
                for pipeline, seconds in _pipeline_walls(home, result).items():
                    wall[name][pipeline] += seconds
                wall[name]["(whole job)"] += total
                for child in result.children:
                    for problem in child.results:
                        passed[(name, child.pipeline)][problem.task_id] = problem.passed
                    if "prompt_reuse_ratio" in child.metrics:
                        reused[(name, child.pipeline)][0] += child.metrics["prompt_tokens_reused"]
                        reused[(name, child.pipeline)][1] += child.metrics["prompt_tokens"]
                print(f"chunk {index + 1}/{len(chunks)} {name}: {total:.0f} s", file=sys.stderr, flush=True)
            print_table([p["name"] for p in shipped["pipelines"]], sum(map(len, chunks[:index + 1])),
                        args.chunk, loads, wall, passed, reused)


if __name__ == "__main__":
    main()
