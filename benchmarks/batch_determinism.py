"""Does serving problems concurrently change greedy answers? The baseline (one greedy coder call
per problem) on the bundled model with llama-server, ``--concurrency`` problems at once vs one at
a time, each from an empty LM cache, side by side in one run. Prints how many final programs and
pass/fail outcomes differ.

Why it matters: with continuous batching a request's logits are computed in batches whose make-up
depends on what else is in flight; floating-point sums in another order can flip a near-tie
between two tokens. A harness that replays its LM cache is unaffected (same request, same cached
answer: tests/experiments/test_parallel_agents_runs.py); this measures a fresh run.

    .venv/bin/python benchmarks/batch_determinism.py [--limit 20] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.experiments.api import offline_defaults, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    offline_defaults()
    spec = {
        "name": "batch_determinism", "dataset": {"source": "humaneval", "limit": args.limit},
        "model": {"id": "local", "server": "llama-server", "temperature": 0.0, "max_tokens": 1024},
        "pipelines": [{"name": "baseline"}], "seeds": [0], "pool": {"persist": False},
    }
    tables = {}
    with tempfile.TemporaryDirectory(prefix="batch-determinism-") as scratch:
        for concurrency in (1, args.concurrency):
            result = run({**spec, "concurrency": concurrency}, home=Path(scratch) / str(concurrency),
                         progress=False, compare=False)
            (child,) = result.children
            tables[concurrency] = {r.task_id: (r.final_code, r.passed) for r in child.results}
    one, many = tables[1], tables[args.concurrency]
    code_differs = sum(one[t][0] != many[t][0] for t in one)
    outcome_differs = sum(one[t][1] != many[t][1] for t in one)
    print(f"baseline, {len(one)} problems, greedy, llama-server: concurrency 1 vs {args.concurrency}")
    print(f"final programs that differ: {code_differs}; pass/fail outcomes that differ: {outcome_differs}")
    print(f"passed: {sum(p for _, p in one.values())} vs {sum(p for _, p in many.values())}")


if __name__ == "__main__":
    main()
