"""Benchmark: the sandbox's per-sample overhead against an earlier revision, and its memory while
a candidate prints a lot (issue #15: output volume never decides a verdict).

Two measurements, each in a fresh worker process per source tree (this checkout, and
``--baseline REV`` exported with ``git archive`` into a temporary directory), so both trees'
``eval`` packages run side by side in one script run:

- overhead: ``--samples`` sequential ``run_program`` calls of a trivial passing candidate
  after one untimed warm-up sample (which starts the lane); the trees take turns for
  ``--rounds`` rounds so that load from other processes on the machine hits both alike.
- flood: one candidate that writes ``--print-mb`` MB to stdout (``os.write`` in 64 KiB chunks)
  and one that ``print``s as much in 10 KB lines; the verdict, its wall time, and the peak RSS
  (VmHWM) of the harness process, the trusted checker and the sandbox server.

Usage: python benchmarks/sandbox_output.py [--baseline main] [--samples 200] [--rounds 3]
       [--print-mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
ADD_TEST = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
TRIVIAL = "def add(a, b):\n    return a + b\n"
FLOODS = {
    "os.write": "import os\nchunk = b'x' * 65536\nfor _ in range({mb} * 16):\n"
                "    os.write(1, chunk)\ndef add(a, b):\n    return a + b\n",
    "print": "line = 'x' * 10239\nfor _ in range({mb} * 1024 // 10):\n    print(line)\n"
             "def add(a, b):\n    return a + b\n",
}


def _peak_rss_mib(pid: int) -> tuple[str, int]:
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return status["Name"].strip(), int(status["VmHWM"].split()[0]) // 1024


def _descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_descendants(int(child))]
    return found


def worker(tree: str, samples: int, print_mb: int) -> dict[str, Any]:
    """Runs inside a fresh process with ``tree`` first on ``sys.path``."""
    sys.path.insert(0, tree)
    from critiquelab.eval.execution import run_program, shutdown

    run_program(TRIVIAL, ADD_TEST, "add", timeout_s=5)  # warm-up: starts the lane
    start = time.perf_counter()
    for _ in range(samples):
        assert run_program(TRIVIAL, ADD_TEST, "add", timeout_s=5).passed
    result: dict[str, Any] = {"ms_per_sample": 1000 * (time.perf_counter() - start) / samples}
    if print_mb:
        floods = {}
        for name, template in FLOODS.items():
            begin = time.perf_counter()
            verdict = run_program(template.format(mb=print_mb), ADD_TEST, "add", timeout_s=30)
            floods[name] = {"status": verdict.status.value, "reason": verdict.reason,
                            "detail": verdict.detail, "wall_s": time.perf_counter() - begin}
        result["floods"] = floods
        result["peak_rss_mib"] = {
            "harness": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            **{f"{name} ({pid})": mib for pid in _descendants(os.getpid())
               for name, mib in [_peak_rss_mib(pid)]},
        }
    shutdown()
    return result


def _export(rev: str, into: str) -> str:
    archive = subprocess.run(["git", "-C", str(HERE), "archive", "--format=tar", rev],
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as fh:
        fh.write(archive)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(into, filter="data")
    return into


def _run_worker(tree: str, samples: int, print_mb: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", tree,
         "--samples", str(samples), "--print-mb", str(print_mb)],
        capture_output=True, text=True, check=True, cwd=tree,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="git revision to compare with (e.g. main)")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--print-mb", type=int, default=200)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.samples, args.print_mb)))
        return

    with tempfile.TemporaryDirectory(prefix="critiquelab-bench-") as scratch:
        trees = {"current": str(HERE)}
        if args.baseline:
            trees[f"baseline {args.baseline}"] = _export(args.baseline, scratch)
        times: dict[str, list[float]] = {name: [] for name in trees}
        floods: dict[str, dict[str, Any]] = {}
        for round_no in range(args.rounds):
            for name, tree in trees.items():
                last = round_no == args.rounds - 1
                result = _run_worker(tree, args.samples, args.print_mb if last else 0)
                times[name].append(result["ms_per_sample"])
                if last and "floods" in result:
                    floods[name] = result
    print(f"{args.samples} sequential samples of a trivial passing candidate, "
          f"{args.rounds} alternating rounds (ms per sample):")
    for name, values in times.items():
        print(f"  {name:>20}: " + ", ".join(f"{v:.2f}" for v in values)
              + f"  -> median {statistics.median(values):.2f}, min {min(values):.2f}")
    if args.baseline:
        current, base = (statistics.median(v) for v in times.values())
        best_current, best_base = (min(v) for v in times.values())
        print(f"  ratio current / baseline: medians {current / base:.3f}, "
              f"minima {best_current / best_base:.3f}")
    for name, result in floods.items():
        print(f"\n[{name}] a candidate writing {args.print_mb} MB to stdout:")
        for how, flood in result["floods"].items():
            print(f"  {how:>8}: {flood['status']} {flood['reason']!r} in {flood['wall_s']:.2f}s;"
                  f" detail {flood['detail'][:100]!r}")
        print("  peak RSS (MiB): " + ", ".join(f"{k} {v}" for k, v in
                                               result["peak_rss_mib"].items()))


if __name__ == "__main__":
    main()
