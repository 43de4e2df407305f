"""Harness overhead per problem against LM time per problem, measured side by side.

Part A runs the baseline over HumanEval against a zero-latency scripted OpenAI-compatible
endpoint: everything that is not the model (DSPy prompt formatting and parsing, the HTTP
client, code assembly, the sandboxed hidden test, checkpointing, MLflow logging) is harness
time. "Steady" is per problem on the hot path; "amortised" divides the whole wall time,
including one-off start-up and waiting at the end for the pool's background writer to embed
every message — with an instant LM that backlog is all paid at the end, while with a real model
the writer keeps up during LM calls (but takes CPU from it; see benchmarks/pool_overhead.py).
Part B runs the same pipeline on a few problems with the real bundled model and takes
the LM time per problem from the usage meter. Target: harness ≤ 1 % of LM time.

    .venv/bin/python benchmarks/overhead.py [--problems 164] [--real-problems 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.fake_openai import FakeOpenAIServer, humaneval_responder

from critiquelab.eval.datasets import load_problems
from critiquelab.experiments.api import offline_defaults, run


def _spec(model: dict, limit: int, persist: bool = True) -> dict:
    return {"name": "overhead", "dataset": {"source": "humaneval", "limit": limit},
            "model": model, "pipelines": [{"name": "baseline"}], "seeds": [0],
            "pool": {"persist": persist}}


def _lm_seconds(result) -> list[float]:
    return [sum(u["latency_s"] for u in r.usage_by_role.values()) for r in result.children[0].results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=164)
    parser.add_argument("--real-problems", type=int, default=5)
    args = parser.parse_args()
    offline_defaults()
    problems = load_problems()

    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(humaneval_responder(problems)) as fake:
        model = {"id": "openai/scripted", "api_base": fake.api_base}
        start = time.monotonic()
        run(_spec(model, args.problems, persist=False), home=Path(tmp) / "memory", progress=False)
        wall_memory = time.monotonic() - start
        start = time.monotonic()
        scripted = run(_spec(model, args.problems), home=Path(tmp) / "chroma", progress=False)
        wall = time.monotonic() - start
    per_problem = [r.latency_s - lm for r, lm in zip(scripted.children[0].results, _lm_seconds(scripted),
                                                      strict=True)]
    scripted_lm = sum(_lm_seconds(scripted))
    harness_steady = statistics.mean(per_problem)
    harness_amortised = (wall - scripted_lm) / args.problems

    with tempfile.TemporaryDirectory() as tmp:
        real = run(_spec({"id": "local"}, args.real_problems), home=Path(tmp), progress=False)
    lm_per_problem = statistics.mean(_lm_seconds(real))

    print(f"scripted LM, {args.problems} problems: wall {wall:.2f}s, "
          f"scripted-endpoint time {scripted_lm:.2f}s")
    print(f"  harness per problem (solve+score minus LM): {harness_steady * 1000:.1f} ms")
    print(f"  harness per problem incl. start-up, MLflow, checkpoints, pool flush: "
          f"{harness_amortised * 1000:.1f} ms")
    print(f"  the same with the pool in memory (no Chroma): "
          f"{(wall_memory - scripted_lm) / args.problems * 1000:.1f} ms")
    print(f"real bundled model, {args.real_problems} problems: LM time per problem {lm_per_problem:.2f}s")
    print(f"ratio harness/LM: steady {harness_steady / lm_per_problem:.2%}, "
          f"with fixed costs {harness_amortised / lm_per_problem:.2%} (target <= 1%)")


if __name__ == "__main__":
    main()
