"""Local serving old vs new, side by side in one run: llama-cpp-python's server (one request at a
time) against the set-up's llama-server (parallel slots), on the bundled 0.5B model.

- generation: N concurrent requests with fresh prompts (no cache hits), 300-token answers (end of
  sequence suppressed so every answer is that long): aggregate completion tok/s;
- prompt processing: N concurrent fresh ~500-token prompts, 1-token answers: aggregate prompt tok/s;
- prefix reuse: two agents' 1.2k-token prefixes (say, two problems' roles), new questions sent
  alternately A, B, A, B after one priming request each — a single-sequence server re-evaluates
  the prefix every time the other agent's prompt came in between; then four new questions on A
  at once (across slots). Seconds, and the prompt tokens the server reports it took from its cache.

The machine is shared: before each measurement the 1-minute load average must be below 1.5; the
benchmark waits for that (at most 60 s each, 10 minutes in all) and prints it with each figure.
Concurrent requests are N threads posting to /v1/chat/completions directly (no client overhead).

    .venv/bin/python benchmarks/serving.py [--concurrency 1,2,4,8] [--repeat 1] [--slots 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from critiquelab.experiments.serving.local_server import Backend, LocalModelServer, select_backend
from critiquelab.experiments.serving.model_files import ensure_model_file, resolve_bundled
from critiquelab.experiments.serving.server_build import find_built_server

ANSWER_TOKENS = 300
QUIET_LOAD = 1.5
# Qwen2.5's end-of-sequence tokens (<|endoftext|>, <|im_end|>): suppressed so answers run to length.
NO_EOS = {"151643": -100, "151645": -100}


@dataclass
class QuietGate:
    """Waits for a quiet machine before a measurement, within a total budget."""

    budget_s: float = 600.0
    each_s: float = 60.0
    waited_s: float = field(default=0.0)

    def wait(self) -> float:
        start = time.monotonic()
        while (os.getloadavg()[0] >= QUIET_LOAD and time.monotonic() - start < self.each_s
               and self.waited_s + time.monotonic() - start < self.budget_s):
            time.sleep(2)
        self.waited_s += time.monotonic() - start
        return os.getloadavg()[0]


def _post(api_base: str, messages: list[dict[str, str]], max_tokens: int, **extra: Any) -> dict[str, Any]:
    body = {"model": "bench", "messages": messages, "max_tokens": max_tokens, "temperature": 0.0, **extra}
    request = urllib.request.Request(
        f"{api_base}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=900) as response:
        return dict(json.load(response)["usage"])


def _concurrently(
    api_base: str, prompts: list[str], max_tokens: int, **extra: Any
) -> tuple[float, list[dict[str, Any]]]:
    start = time.monotonic()
    with ThreadPoolExecutor(len(prompts)) as pool:
        usages = list(pool.map(
            lambda p: _post(api_base, [{"role": "user", "content": p}], max_tokens, **extra), prompts
        ))
    return time.monotonic() - start, usages


def _fresh(kind: str) -> str:
    """A prompt no server has seen: it starts with a new nonce."""
    nonce = uuid.uuid4().hex
    if kind == "generate":
        return (f"[{nonce}] Write a long Python module of utility functions for text processing, "
                "each with a docstring.")
    words = " ".join(f"item{(int(nonce[:6], 16) + i) % 9973}" for i in range(95))  # ~500 tokens
    return f"[{nonce}] Here is a list: {words}. How many items are there?"


def _prefix(topic: str) -> str:
    """~1.2k tokens that two questions of one agent share (instructions and a task)."""
    lines = [f"Rule {i}: function f{i}(x) must return x * {i} + {i % 7}." for i in range(53)]
    return f"You are {topic}, a careful Python developer.\n" + "\n".join(lines) + "\n\nQuestion: "


def _cached(usages: list[dict[str, Any]]) -> str:
    """Prompt tokens the server took from its cache / prompt tokens sent."""
    sent = sum(u["prompt_tokens"] for u in usages)
    if not all("prompt_tokens_details" in u for u in usages):
        return f"not reported/{sent}"
    return f"{sum(int(u['prompt_tokens_details'].get('cached_tokens') or 0) for u in usages)}/{sent}"


def _measure(api_base: str, levels: list[int], gate: QuietGate, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"generate": {}, "prompt": {}}

    def progress(what: str, value: float, load: float) -> None:  # the figures so far, if cut short
        print(f"  {name}: {what} {value:.1f} @load {load:.1f}", file=sys.stderr, flush=True)

    _post(api_base, [{"role": "user", "content": "Hi"}], 4)  # warm-up, not measured
    for n in levels:
        load = gate.wait()
        wall, usages = _concurrently(api_base, [_fresh("generate") for _ in range(n)], ANSWER_TOKENS,
                                     logit_bias=NO_EOS)
        out["generate"][n] = (sum(u["completion_tokens"] for u in usages) / wall, load)
        progress(f"{n} concurrent, completion tok/s", *out["generate"][n])
        load = gate.wait()
        wall, usages = _concurrently(api_base, [_fresh("prompt") for _ in range(n)], 1)
        out["prompt"][n] = (sum(u["prompt_tokens"] for u in usages) / wall, load)
        progress(f"{n} concurrent, prompt tok/s", *out["prompt"][n])

    a, b = _prefix(f"agent A{uuid.uuid4().hex[:8]}"), _prefix(f"agent B{uuid.uuid4().hex[:8]}")
    load = gate.wait()
    start = time.monotonic()
    first = [_post(api_base, [{"role": "user", "content": p + "What is f1(2)?"}], 8) for p in (a, b)]
    primed = time.monotonic() - start
    start = time.monotonic()
    alternating = [_post(api_base, [{"role": "user", "content": p + f"What is f{k}(3)?"}], 8)
                   for k in range(2, 4) for p in (a, b)]
    alternated = time.monotonic() - start
    wall, across = _concurrently(api_base, [a + f"What is f{k}(5)?" for k in range(4, 8)], 8)
    out["prefix"] = {
        "load": load, "prefix_tokens": first[0]["prompt_tokens"], "prime_s": primed / 2,
        "alternate_s": alternated / len(alternating), "across_slots_s": wall,
        "cached": _cached(alternating + across),
    }
    return out


def _serve_and_measure(backend: Backend, model: Path, slots: int, levels: list[int], gate: QuietGate,
                       log: Path) -> dict[str, Any]:
    server = LocalModelServer(model, "bench", backend=backend, n_ctx=4096, slots=slots, log_path=log)
    with server:
        return _measure(server.api_base, levels, gate, backend.name)


def _cell(values: list[tuple[float, float]]) -> str:
    rates = [v for v, _ in values]
    spread = f" ({min(rates):.0f}–{max(rates):.0f})" if len(rates) > 1 else ""
    return f"{statistics.median(rates):6.1f}{spread} @load {max(load for _, load in values):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--slots", type=int, default=8,
                        help="llama-server slots (>= the highest concurrency)")
    args = parser.parse_args()
    levels = [int(n) for n in args.concurrency.split(",")]
    bundled = resolve_bundled("local")
    assert bundled is not None
    model = ensure_model_file(bundled)
    built = find_built_server()
    if built is None:
        raise SystemExit("llama-server was not built: run scripts/build_llama_server.sh first")
    backends = [Backend("llama-cpp-python"), select_backend("llama-server", built)]
    gate = QuietGate()
    results: dict[str, list[dict[str, Any]]] = {b.name: [] for b in backends}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for backend in backends:  # alternating, so drifting load hits both alike
                results[backend.name].append(
                    _serve_and_measure(backend, model, args.slots, levels, gate, Path(tmp) / "server.log")
                )
    print(f"bundled 0.5B model, {os.cpu_count()} cores, {args.repeat} repetition(s), llama-server "
          f"{args.slots} slots ({backends[1].version}); median (range) @ highest 1-min load average")
    print(f"{'':24}{'llama-cpp-python':>34}{'llama-server':>34}")
    for what, label in (("generate", f"completion tok/s ({ANSWER_TOKENS}-token answers)"),
                        ("prompt", "prompt tok/s (fresh prompts)")):
        print(label)
        for n in levels:
            cells = [_cell([run[what][n] for run in results[b.name]]) for b in backends]
            print(f"  {n} concurrent{'':12}{cells[0]:>34}{cells[1]:>34}")
    print("prefix reuse (seconds; prompt tokens taken from the server's cache / sent)")
    rows = (("first request of a prefix", "prime_s"), ("A,B alternating, new question", "alternate_s"),
            ("4 new questions on A at once (all 4)", "across_slots_s"))
    for row, key in rows:
        cells = [f"{statistics.median(run['prefix'][key] for run in results[b.name]):6.2f}" for b in backends]
        print(f"  {row:38}{cells[0]:>20}{cells[1]:>34}")
    cached = [results[b.name][-1]["prefix"]["cached"] for b in backends]
    print(f"  {'cached/sent prompt tokens':38}{cached[0]:>20}{cached[1]:>34}")
    print(f"prefix {results[backends[0].name][0]['prefix']['prefix_tokens']} prompt tokens; waited "
          f"{gate.waited_s:.0f}s for a quiet machine; total {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
