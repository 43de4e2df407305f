"""Is the critic loop's echo the fixer's model or its instruction? A finished run's fixer requests,
replayed as recorded and with one sentence of the instruction changed, on a bundled model.

The controls table (`experiments/critic_controls.yaml`) found the fixer returning the code it was
given even when told what the hidden tests say (the oracle_feedback control), with the 0.5B and
with the 1.5B model. This script reads every fixer request of a run (a parent: all its pipelines)
whose input code fails the hidden tests, and sends each one, at its recorded settings, one at a
time, to the bundled model given by ``--model`` — once as recorded and once with the
instruction's "keep what already works" sentence replaced by one that says the code is wrong
(``REWORDED``); nothing else in the request changes. Per variant it prints how many replies are
the input code again (equal syntax trees: an echo) and how many pass the hidden tests. The
requests of an oracle_feedback run carry hidden-test text, as that control's do; the replies are
scored here and go nowhere else. No LM cache is used and nothing is written to the data directory.

    .venv/bin/python benchmarks/fixer_echo_probe.py RUN_ID [--home DIR] [--model local-1.5b]
        [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.eval.assembly import extract_code
from critiquelab.eval.datasets import load_problems
from critiquelab.eval.program_identity import same_program
from critiquelab.eval.scoring import score_code
from critiquelab.experiments.api import offline_defaults
from critiquelab.experiments.paths import data_dir
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.experiments.serving.local_server import LocalModelServer, select_backend
from critiquelab.experiments.serving.model_files import ensure_model_file, resolve_bundled
from critiquelab.experiments.serving.server_build import find_built_server
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.experiments.viewer.data import ViewerData, message_trace

KEPT = "Address every valid finding in the review and keep what already works."
REWORDED = ("The current implementation is wrong: the review (and the test results, when given) say "
            "how. Change what makes it wrong; the same code again is not an answer.")
TIMEOUT_S = 10.0


@dataclass
class FixerCall:
    task_id: str
    code: str  # the code the fixer was asked to revise
    messages: list[dict[str, Any]]
    settings: dict[str, Any]


def failing_fixer_calls(home: Path, run_id: str, problems: dict[str, Any]) -> list[FixerCall]:
    """The run's fixer calls whose input code fails the problem's hidden tests, in order; a request
    made again (a later round after an echo asks the same) once, as its greedy reply is the same."""
    data = ViewerData(tracking_uri(home, None))
    runs = [r.run_id for r in data.runs() if r.parent_id == run_id] or [run_id]
    calls: list[FixerCall] = []
    seen: set[str] = set()
    for child in runs:
        for result in data.problems(child):
            _, messages = data.problem(child, result.task_id)
            for message in messages:
                trace = message_trace(message)
                if trace.get("role") != "fixer":
                    continue
                code = str((trace.get("inputs") or {}).get("code", ""))
                problem = problems[result.task_id]
                if score_code(problem, code, TIMEOUT_S)[1].passed:
                    continue
                for exchange in trace.get("exchanges") or []:
                    key = json.dumps([exchange["request"], exchange.get("settings")], sort_keys=True)
                    if "settings" in exchange and key not in seen:
                        seen.add(key)
                        request, settings = exchange["request"], exchange["settings"]
                        calls.append(FixerCall(result.task_id, code, request, settings))
    return calls


def reworded(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    system = str(messages[0]["content"])
    if KEPT not in system:
        raise SystemExit("the fixer's instruction no longer holds the sentence this probe rewords")
    return [{**messages[0], "content": system.replace(KEPT, REWORDED)}, *messages[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_id", help="a parent run or one pipeline's run")
    parser.add_argument("--home", type=Path, default=None, help="the data directory (default: as run)")
    parser.add_argument("--model", default="local", choices=["local", "local-1.5b"])
    parser.add_argument("--limit", type=int, default=0, help="at most N requests")
    args = parser.parse_args()
    offline_defaults()
    problems = {p.task_id: p for p in load_problems()}
    calls = failing_fixer_calls(args.home or data_dir(), args.run_id, problems)
    calls = calls[: args.limit] if args.limit else calls
    if not calls:
        sys.exit("no recorded fixer request on failing code in that run")
    bundled = resolve_bundled(args.model)
    assert bundled is not None
    server = LocalModelServer(ensure_model_file(bundled), "probe", n_ctx=8192, slots=1,
                              n_threads=max(1, os.cpu_count() or 1),
                              backend=select_backend("llama-server", find_built_server())).start()
    tally = {"recorded": [0, 0], "reworded": [0, 0]}  # [echoes, hidden-test passes]
    try:
        lm = HarnessLM("openai/probe", identity="probe", cache_dir=None, api_base=server.api_base,
                       api_key="local", num_retries=0, timeout=600)
        for index, call in enumerate(calls, 1):
            problem = problems[call.task_id]
            for variant, messages in (("recorded", call.messages), ("reworded", reworded(call.messages))):
                reply = str(lm(messages=messages, **call.settings)[0])
                code = extract_code(reply, problem.entry_point)
                tally[variant][0] += same_program(code, call.code)
                tally[variant][1] += score_code(problem, code, TIMEOUT_S)[1].passed
            print(f"{index}/{len(calls)} {call.task_id}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    print(f"{len(calls)} distinct fixer requests on failing code "
          f"({len({c.task_id for c in calls})} problems), replayed on {args.model}:")
    print(f"{'instruction':<12}{'echoes':>8}{'pass hidden tests':>19}")
    for variant, (echoes, passes) in tally.items():
        print(f"{variant:<12}{echoes:>8}{passes:>19}")


if __name__ == "__main__":
    main()
