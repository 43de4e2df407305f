"""`parallel_agents` through the runner: a spec run with its agents one call at a time and the
same spec with parallel agents (and two problems at once) give identical per-problem tables —
statuses, tokens per problem and per role, LM calls, final code, debate and vote metrics —
whether the parallel run replays the sequential run's LM cache or asks the endpoint afresh, in
which case it sends exactly the same requests. Ctrl-C still stops a run at once."""

from __future__ import annotations

import hashlib
import json
import signal
import threading
import time
from collections import Counter

import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run

PROBE = "Reply with OK."


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def _scripts(problems, hold=None):
    """Replies that depend on the whole request (and the seed), right or wrong code per problem;
    ``hold(text, body)`` may block a request."""
    scripted = ScriptedProblems(problems)

    def solution(text, right):
        return scripted.solution(text) if right else scripted.wrong(text)

    def coder(text, body):
        if hold is not None:
            hold(text, body)
        return {"code": solution(text, body["seed"] % 3 != 0)}

    def debater(text, body):
        digest = _digest(text)
        return {"argument": f"argument {digest % 10**8}", "revised_code": solution(text, digest % 3 != 0)}

    def judge(text, body):
        digest = _digest(text)
        return {"choice": str(digest % 3 + 1), "rationale": f"because {digest % 10**6}", "merged_code": ""}

    return {"coder": coder, "debater": debater, "judge": judge}


def _spec(api_base, *, parallel, concurrency, limit=2):
    return fake_spec(
        api_base, limit=limit, concurrency=concurrency, pool={"persist": False},
        pipelines=[
            {"name": "debate", "params": {"debaters": 3, "rounds": 2, "parallel_agents": parallel}},
            {"name": "vote", "params": {"k": 5, "parallel_agents": min(parallel, 5)}},
        ],
    )


def _tables(result):
    """Each pipeline's per-problem rows, without what is expected to differ between runs (wall
    and model times, pool thread ids, how many calls the cache answered)."""
    tables = {}
    for child in result.children:
        rows = []
        for problem in child.results:
            row = problem.model_dump(exclude={"latency_s", "thread_id", "cached_lm_calls"})
            row["usage_by_role"] = {
                role: {k: v for k, v in usage.items() if k not in ("latency_s", "model_s")}
                for role, usage in row["usage_by_role"].items()
            }
            rows.append(row)
        tables[child.pipeline] = rows
    return tables


def _model_requests(fake):
    return Counter(
        json.dumps(r, sort_keys=True) for r in fake.requests
        if PROBE not in json.dumps(r.get("messages", []))
    )


def test_parallel_agents_give_the_same_tables_and_requests(tmp_path, monkeypatch, humaneval_problems):
    scripts = role_responder(_scripts(humaneval_problems), with_body=True)
    first, second = tmp_path / "home", tmp_path / "other-home"
    monkeypatch.setenv("CRITIQUELAB_HOME", str(first))
    with FakeOpenAIServer(scripts, pass_body=True, jitter_s=0.1) as fake:
        sequential = run(_spec(fake.api_base, parallel=1, concurrency=1), progress=False, compare=False)
        sent = _model_requests(fake)
        assert fake.max_in_flight == 1
        # The same data directory, checkpoints ignored (they are shared: the key leaves
        # parallel_agents out): every model call is answered by the sequential run's cache.
        replayed = run(_spec(fake.api_base, parallel=3, concurrency=2), progress=False, compare=False,
                       fresh=True)
        assert _model_requests(fake) == sent
    assert _tables(replayed) == _tables(sequential)
    assert all(r.cached_lm_calls == r.lm_calls > 0 for c in replayed.children for r in c.results)

    monkeypatch.setenv("CRITIQUELAB_HOME", str(second))
    with FakeOpenAIServer(scripts, pass_body=True, jitter_s=0.1) as fake:
        fresh = run(_spec(fake.api_base, parallel=3, concurrency=2), progress=False, compare=False)
        assert _model_requests(fake) == sent  # the same requests, though answered in another order
        assert fake.max_in_flight >= 3  # more than two problems at once could ask on their own
    assert _tables(fresh) == _tables(sequential)
    debate = _tables(sequential)["debate"]
    assert {role for row in debate for role in row["usage_by_role"]} == {"coder", "debater", "judge"}
    assert all(len(row["extra"]["debaters_first_passed"]) == 3 for row in debate)


def test_ctrl_c_with_parallel_agents_in_flight_stops_at_once(home, humaneval_problems):
    """The second problem's debaters are all waiting for the model when Ctrl-C arrives: the run
    stops without waiting for them, and only the first problem is recorded."""
    stuck = humaneval_problems[1].prompt.strip()
    waiting, release = threading.Semaphore(0), threading.Event()

    def hold(text, body):
        if stuck in text:
            waiting.release()
            release.wait(60)

    def interrupt_when_all_wait():
        if all(waiting.acquire(timeout=60) for _ in range(3)):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    with FakeOpenAIServer(role_responder(_scripts(humaneval_problems, hold), with_body=True),
                          pass_body=True) as fake:
        threading.Thread(target=interrupt_when_all_wait, daemon=True).start()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                run(_spec(fake.api_base, parallel=3, concurrency=1), progress=False, compare=False)
            stopped_after = time.monotonic() - started
        finally:
            release.set()
            signal.signal(signal.SIGINT, previous)
        assert fake.max_in_flight >= 3
    assert stopped_after < 30, f"the interrupt waited {stopped_after:.0f}s for the agents in flight"
    checkpoint = next((home / "checkpoints").glob("*/debate*.jsonl"))
    assert [json.loads(line)["task_id"] for line in checkpoint.read_text().splitlines()] == [
        "HumanEval/0"
    ]


def test_parallel_agents_does_not_split_checkpoints():
    """It changes when calls are made, never what they ask: the same finished problems serve both."""
    from critiquelab.experiments.checkpoints import checkpoint_key, input_fingerprints
    from critiquelab.experiments.serving.provision import ModelIdentity
    from critiquelab.experiments.spec.experiment import parse_spec

    identity = ModelIdentity("openai/fake", "openai/fake", api_base="http://x")

    def key(params: dict) -> str:
        spec = parse_spec({"name": "x", "pipelines": [{"name": "debate", "params": params}]})
        return checkpoint_key(spec, identity, input_fingerprints(spec, "sqlite:///x"))

    keys = {key({"parallel_agents": n}) for n in (1, 3)}
    other = key({"debaters": 2})
    assert len(keys) == 1 and other not in keys
