"""Speculative decoding role by role: a finished run's requests replayed against the bundled model
served with speculation off and on, side by side.

Every role call a run makes keeps its exact request (chat messages and the settings that decide
the reply: temperature, seed, max_tokens); this script reads them from the run's message log and
sends each one, one at a time (concurrency 1), to two llama-servers started side by side with the
same model, slots and threads — one per ``--modes`` entry — alternating which server answers
first. Prints per role: requests, replies byte-identical between the two servers (all, and of
the greedy requests: temperature 0), completion tokens, seconds and tokens/s on each, the
speed-up, and the share of drafted tokens the model accepted (from the speculating server's
/metrics). No LM cache is used and nothing is written to the data directory.

    .venv/bin/python benchmarks/speculative_replay.py RUN_ID [--home DIR] [--modes off,ngram]
        [--roles fixer,debater] [--limit N] [--greedy] [--model local-1.5b]

RUN_ID is a parent run (every pipeline's requests) or one pipeline's run. ``--model`` is the
bundled model both servers serve (default ``local``); mode ``draft`` needs ``local-1.5b``, for
which the bundled 0.5B drafts, as a run's ``model.speculative: draft`` does.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.api import offline_defaults
from critiquelab.experiments.paths import data_dir
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.experiments.serving.local_server import LocalModelServer, select_backend
from critiquelab.experiments.serving.model_files import ensure_model_file, resolve_bundled
from critiquelab.experiments.serving.provision import draft_model_file
from critiquelab.experiments.serving.server_build import find_built_server
from critiquelab.experiments.serving.speculation import Speculation
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.experiments.viewer.data import ViewerData, message_trace


@dataclass
class Call:
    role: str
    messages: Any
    settings: dict[str, Any]


def recorded_calls(home: Path, run_id: str) -> list[Call]:
    """Every role call of the run (or of each pipeline run of a parent), in the order made."""
    data = ViewerData(tracking_uri(home, None))
    runs = [r.run_id for r in data.runs() if r.parent_id == run_id] or [run_id]
    calls = []
    for child in runs:
        for problem in data.problems(child):
            _, messages = data.problem(child, problem.task_id)
            for message in messages:
                trace = message_trace(message)
                for exchange in trace.get("exchanges") or []:
                    if "settings" not in exchange:
                        continue  # recorded before exchanges kept their settings
                    calls.append(Call(str(trace.get("role", "?")), exchange["request"], exchange["settings"]))
    return calls


def _draft_counters(server: LocalModelServer) -> tuple[float, float]:
    """llama-server's totals of drafted and accepted tokens so far (0, 0 when not speculating)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as response:
        text = response.read().decode()

    def total(name: str) -> float:
        found = re.search(rf"^llamacpp:{name} (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    return total("spec_decode_num_draft_tokens_total"), total("spec_decode_num_accepted_tokens_total")


@dataclass
class Tally:
    requests: int = 0
    identical: int = 0
    greedy: int = 0  # requests at temperature 0, whose replies should not depend on speculation
    greedy_identical: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    drafted: float = 0.0
    accepted: float = 0.0


def replay(calls: list[Call], modes: list[Speculation], slots: int, model: str) -> dict[str, Tally]:
    bundled = resolve_bundled(model)
    assert bundled is not None
    path = ensure_model_file(bundled)
    backend = select_backend("llama-server", find_built_server())
    threads = max(1, os.cpu_count() or 1)
    servers = {mode: LocalModelServer(
        path, "bench", backend=backend, n_ctx=8192, slots=slots, n_threads=threads, speculation=mode,
        draft_model=draft_model_file() if mode == "draft" else None,
    ).start() for mode in modes}
    try:
        lms = {mode: HarnessLM("openai/bench", identity="bench", cache_dir=None, api_base=s.api_base,
                               api_key="local", num_retries=0, timeout=600) for mode, s in servers.items()}
        tallies: dict[str, Tally] = defaultdict(Tally)
        for index, call in enumerate(calls):
            tally = tallies[call.role]
            replies = {}
            for mode in modes if index % 2 == 0 else list(reversed(modes)):
                before = _draft_counters(servers[mode])
                meter = UsageMeter()
                start = time.monotonic()
                with metering(meter):
                    replies[mode] = lms[mode](messages=call.messages, **call.settings)
                tally.seconds[mode] += time.monotonic() - start
                tally.tokens[mode] += meter.total().completion_tokens
                after = _draft_counters(servers[mode])
                tally.drafted += after[0] - before[0]
                tally.accepted += after[1] - before[1]
            same = len({str(r) for r in replies.values()}) == 1
            greedy = not call.settings.get("temperature")
            tally.requests += 1
            tally.identical += same
            tally.greedy += greedy
            tally.greedy_identical += greedy and same
            print(f"{index + 1}/{len(calls)} {call.role}", file=sys.stderr, flush=True)
        return tallies
    finally:
        for server in servers.values():
            server.stop()


def print_table(tallies: dict[str, Tally], modes: list[str]) -> None:
    a, b = modes
    print(f"{'role':<16}{'requests':>9}{'identical':>10}{'greedy same':>12}"
          f"{'tokens ' + a:>14}{'tokens ' + b:>14}{'s ' + a:>9}{'s ' + b:>9}"
          f"{'tok/s ' + a:>12}{'tok/s ' + b:>12}{'speed-up':>9}{'accepted':>9}")
    for role, t in sorted(tallies.items()):
        rate = {m: t.tokens[m] / t.seconds[m] if t.seconds[m] else 0.0 for m in modes}
        accepted = f"{t.accepted / t.drafted:.0%}" if t.drafted else "-"
        greedy = f"{t.greedy_identical}/{t.greedy}" if t.greedy else "-"
        print(f"{role:<16}{t.requests:>9}{t.identical:>10}{greedy:>12}{t.tokens[a]:>14}{t.tokens[b]:>14}"
              f"{t.seconds[a]:>9.1f}{t.seconds[b]:>9.1f}{rate[a]:>12.1f}{rate[b]:>12.1f}"
              f"{t.seconds[a] / t.seconds[b] if t.seconds[b] else 0:>9.2f}{accepted:>9}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_id", help="a parent run or one pipeline's run")
    parser.add_argument("--home", type=Path, default=None, help="the data directory (default: as run)")
    parser.add_argument("--modes", default="off,ngram", help="two of off, ngram, draft")
    parser.add_argument("--roles", default="", help="only these roles (comma-separated)")
    parser.add_argument("--limit", type=int, default=0, help="at most N requests per role")
    parser.add_argument("--greedy", action="store_true", help="only requests at temperature 0")
    parser.add_argument("--slots", type=int, default=8, help="llama-server slots (as a run uses)")
    parser.add_argument("--model", default="local", choices=["local", "local-1.5b"],
                        help="the bundled model both servers serve")
    args = parser.parse_args()
    offline_defaults()
    modes = args.modes.split(",")
    if len(modes) != 2 or not set(modes) <= {"off", "ngram", "draft"}:
        parser.error("--modes takes two of off, ngram, draft")
    if "draft" in modes and args.model != "local-1.5b":
        parser.error("mode draft: the bundled 0.5B drafts for local-1.5b only (--model local-1.5b)")
    calls = recorded_calls(args.home or data_dir(), args.run_id)
    wanted = {r for r in args.roles.split(",") if r}
    per_role: dict[str, int] = defaultdict(int)
    chosen = []
    for call in calls:
        if args.greedy and call.settings.get("temperature"):
            continue
        if (not wanted or call.role in wanted) and (not args.limit or per_role[call.role] < args.limit):
            per_role[call.role] += 1
            chosen.append(call)
    if not chosen:
        sys.exit("no recorded requests with settings in that run (runs before this benchmark existed "
                 "did not keep them)")
    print_table(replay(chosen, modes, args.slots, args.model), modes)


if __name__ == "__main__":
    main()
