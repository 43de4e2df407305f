"""Scale-out on Ray against the local executor at the same concurrency.

A scripted OpenAI-compatible endpoint answers every request after ``--delay`` seconds (1 s by
default) and serves requests in parallel; the baseline pipeline solves ``--problems`` HumanEval
problems (64) with the LM cache off, once with the local executor (threads) and once on a Ray
cluster started here (one node, this machine) with 1, 2 and 4 worker processes, each worker
taking ``--per-worker`` problems at once (4), so concurrency is 4, 8, 16 for both executors.
Then an instant endpoint, 64 and all 164 problems, concurrency 4, one worker: the marginal time
per problem of each executor (each Ray run starts fresh worker processes, whose warm-up the
difference between the two sizes cancels), after one discarded warm-up run per executor, local
and Ray alternating ``--repeats`` times: medians and each repeat's ratio. Wall time is the
child run's ``wall_time_s`` (solving, scoring, checkpointing, logging; not start-up). Tables
are checked to be the same as the local executor's.

    nice -n 15 .venv/bin/python benchmarks/scale_out.py [--problems 64] [--delay 1.0] [--workers 1,2,4]
        [--modes scaling,overhead] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

# This checkout's packages (and its test support) before any installed copy: the Ray workers
# import the same files through PYTHONPATH, and the driver checks that they do.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a cluster on 127.0.0.1
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from support.fake_openai import FakeOpenAIServer, humaneval_responder

from critiquelab.eval.datasets import load_problems
from critiquelab.experiments.api import offline_defaults, run

REPO_ROOT = Path(__file__).resolve().parents[1]


def _spec(api_base: str, problems: int, concurrency: int, execution: dict) -> dict:
    return {"name": "scale-out", "dataset": {"source": "humaneval", "limit": problems},
            "model": {"id": "openai/scripted", "api_base": api_base}, "seeds": [0],
            "pipelines": [{"name": "baseline"}], "concurrency": concurrency, "execution": execution}


def _timed(spec: dict, home: Path) -> tuple[float, list[tuple]]:
    result = run(spec, home=home, cache=False, progress=False)
    child = result.children[0]
    table = [(r.task_id, r.status, r.prompt_tokens, r.completion_tokens, r.final_code) for r in child.results]
    return child.metrics["wall_time_s"], table


def _scaling(args: argparse.Namespace, cluster_address: str, api_base: str, tmp: Path) -> None:
    print(f"{args.problems} problems, endpoint {args.delay:g} s per call, {os.cpu_count()} cores")
    print("workers  concurrency  ideal s  local s  ray s  ray/local  ray/ideal")
    for count in (int(w) for w in args.workers.split(",")):
        concurrency = count * args.per_worker
        ray_execution = {"executor": "ray", "address": cluster_address, "workers_per_node": count,
                         "in_flight_per_node": concurrency}
        local_s, local_table = _timed(_spec(api_base, args.problems, concurrency, {}), tmp / f"local-{count}")
        ray_s, ray_table = _timed(_spec(api_base, args.problems, concurrency, ray_execution),
                                  tmp / f"ray-{count}")
        assert ray_table == local_table, "the Ray executor's table differs from the local one"
        ideal = args.problems * args.delay / concurrency
        print(f"{count:7d}  {concurrency:11d}  {ideal:7.1f}  {local_s:7.1f}  {ray_s:5.1f}  "
              f"{ray_s / local_s:9.2f}  {ray_s / ideal if ideal else float('nan'):9.2f}")


def _overhead(args: argparse.Namespace, cluster_address: str, api_base: str, total: int, tmp: Path) -> None:
    """Marginal time per problem of each executor with an instant endpoint, local and Ray
    alternating ``--repeats`` times after one discarded warm-up run each (the first run in a
    process pays imports and caches the later ones do not)."""
    concurrency = args.per_worker
    executions = {"local": {}, "ray": {"executor": "ray", "address": cluster_address,
                                       "in_flight_per_node": concurrency}}
    sizes = (args.problems, total)
    for name, execution in executions.items():
        _timed(_spec(api_base, sizes[0], concurrency, execution), tmp / f"{name}-warm-up")
    marginal: dict[str, list[float]] = {"local": [], "ray": []}
    walls: dict[tuple[str, int], list[float]] = {(name, size): [] for name in executions for size in sizes}
    print(f"instant endpoint, concurrency {concurrency}, 1 worker, {sizes[0]} / {sizes[1]} problems; "
          "marginal ms per problem")
    print("repeat  local ms  ray ms  ray/local   local s small/large  ray s small/large")
    for repeat in range(args.repeats):
        for name, execution in executions.items():
            for size in sizes:
                spec = _spec(api_base, size, concurrency, execution)
                walls[name, size].append(_timed(spec, tmp / f"{name}-{repeat}-{size}")[0])
            # Each Ray run starts fresh worker processes while this process stays warm, so the
            # overhead per problem is the marginal time between two sizes.
            small, large = walls[name, sizes[0]][-1], walls[name, sizes[1]][-1]
            marginal[name].append(_per_problem_ms(small, large, sizes))
        print(f"{repeat + 1:6d}  {marginal['local'][-1]:8.2f}  {marginal['ray'][-1]:6.2f}  "
              f"{marginal['ray'][-1] / marginal['local'][-1]:9.3f}   "
              f"{walls['local', sizes[0]][-1]:7.2f} / {walls['local', sizes[1]][-1]:5.2f}    "
              f"{walls['ray', sizes[0]][-1]:5.2f} / {walls['ray', sizes[1]][-1]:5.2f}")
    local, ray = statistics.median(marginal["local"]), statistics.median(marginal["ray"])
    ratios = ", ".join(f"{r / lo:.3f}" for r, lo in zip(marginal["ray"], marginal["local"], strict=True))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"median  {local:8.2f}  {ray:6.2f}  {ray / local:9.3f}  (ratios {ratios}; load average {load})")
    # One run slowed by the machine's other work skews its repeat's difference; the difference
    # of the median wall times is less sensitive to it.
    local, ray = (_per_problem_ms(*(statistics.median(walls[name, size]) for size in sizes), sizes)
                  for name in executions)
    print(f"from median wall times: local {local:.2f} ms, ray {ray:.2f} ms, ray/local {ray / local:.3f}")


def _per_problem_ms(small_s: float, large_s: float, sizes: tuple[int, int]) -> float:
    return (large_s - small_s) / (sizes[1] - sizes[0]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--per-worker", type=int, default=4)
    parser.add_argument("--modes", default="scaling,overhead",
                        help="which parts to run, comma-separated: scaling, overhead")
    parser.add_argument("--repeats", type=int, default=1, help="overhead: local/Ray alternations")
    args = parser.parse_args()
    modes = set(args.modes.split(","))
    if not modes or modes - {"scaling", "overhead"} or args.repeats < 1:
        parser.exit(2, f"{parser.prog}: --modes takes scaling and/or overhead, --repeats at least 1\n")
    offline_defaults()
    from ray.cluster_utils import Cluster

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    all_problems = load_problems()
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={
        "num_cpus": os.cpu_count() or 2, "object_store_memory": 200 * 2**20, "include_dashboard": False,
    })
    try:
        with tempfile.TemporaryDirectory() as tmp, \
                FakeOpenAIServer(humaneval_responder(all_problems), delay_s=args.delay) as slow, \
                FakeOpenAIServer(humaneval_responder(all_problems)) as instant:
            if "scaling" in modes:
                _scaling(args, cluster.address, slow.api_base, Path(tmp))
            if "overhead" in modes:
                _overhead(args, cluster.address, instant.api_base, len(all_problems), Path(tmp))
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
