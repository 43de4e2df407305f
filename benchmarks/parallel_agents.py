"""Wall time per problem with a problem's agents one call at a time vs in parallel.

Runs debate (3 debaters × 2 rounds: 3 proposals, 6 arguments, 1 verdict) and vote (k=5)
through the runner against a scripted OpenAI-compatible endpoint that takes ``--delay`` seconds
per request and serves requests in parallel, with ``parallel_agents`` 1 and then 3 (debate) / 5
(vote), the LM cache off, one problem at a time. Prints the median wall time per problem
(solving and scoring) and the ratio, and checks that both runs produced the same table.

    .venv/bin/python benchmarks/parallel_agents.py [--problems 3] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.eval.datasets import load_problems
from critiquelab.experiments.api import offline_defaults, run

PIPELINES = {"debate": ({"debaters": 3, "rounds": 2}, 3), "vote": ({"k": 5}, 5)}


def _scripts(problems: list) -> dict:
    def solution(text: str) -> str:
        problem = next(p for p in problems if p.prompt.strip() in text)
        return problem.prompt + problem.canonical_solution

    def digest(text: str) -> int:
        return int(hashlib.sha256(text.encode()).hexdigest(), 16)

    return {
        "coder": lambda text: {"code": solution(text)},
        "debater": lambda text: {
            "argument": f"argument {digest(text) % 10**6}", "revised_code": solution(text),
        },
        "judge": lambda text: {
            "choice": str(digest(text) % 3 + 1), "rationale": "it works", "merged_code": "",
        },
    }


def _spec(api_base: str, name: str, params: dict, limit: int) -> dict:
    return {"name": f"parallel-agents-{name}", "dataset": {"source": "humaneval", "limit": limit},
            "model": {"id": "openai/scripted", "api_base": api_base}, "seeds": [0],
            "pipelines": [{"name": name, "params": params}], "pool": {"persist": False}}


def _row(result) -> list[tuple]:
    return [(r.task_id, r.status, r.prompt_tokens, r.completion_tokens, r.lm_calls, r.final_code)
            for r in result.children[0].results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per model request")
    args = parser.parse_args()
    offline_defaults()
    problems = load_problems()
    print(f"scripted endpoint, {args.delay} s per request; median wall time per problem "
          f"over {args.problems} problems (solve + score)")
    with tempfile.TemporaryDirectory() as tmp, \
            FakeOpenAIServer(role_responder(_scripts(problems)), delay_s=args.delay) as fake:
        for name, (params, parallel) in PIPELINES.items():
            times, tables = {}, {}
            for agents in (1, parallel):
                home = Path(tmp) / f"{name}-{agents}"
                result = run(_spec(fake.api_base, name, {**params, "parallel_agents": agents}, args.problems),
                             home=home, cache=False, progress=False, compare=False)
                times[agents] = statistics.median(r.latency_s for r in result.children[0].results)
                tables[agents] = _row(result)
            same = "same table" if tables[1] == tables[parallel] else "TABLES DIFFER"
            print(f"  {name:7} {params}: parallel_agents 1: {times[1]:.2f} s, {parallel}: "
                  f"{times[parallel]:.2f} s, ratio {times[1] / times[parallel]:.2f}x ({same})")


if __name__ == "__main__":
    main()
