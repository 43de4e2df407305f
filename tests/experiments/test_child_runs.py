"""`parallel_runs`: child runs (pipeline × seed) solved at once. The scheduler alone (order,
bound, the wait of a child measured from earlier ones, the first error stopping the rest), then
through the runner: pipelines with memory — one problem at a time each — give the same tables
and send the same requests whether their children run one after another or at once, and a
child failing mid-run stops the others, resumable by the same command."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter

import pytest
from support.fake_openai import FakeOpenAIServer, HttpError
from support.role_responder import ScriptedProblems, role_responder
from support.specs import fake_spec

from critiquelab.core.errors import ServiceError
from critiquelab.experiments.api import run
from critiquelab.experiments.child_runs import run_children
from critiquelab.experiments.tracking.store import Tracker

PROBE = "Reply with OK."


def _scheduler_probe(hold_s: float = 0.05):
    """``run_one`` that records how many children ran at once and what each saw finished."""
    lock, state = threading.Lock(), {"now": 0, "most": 0}
    seen: dict[str, list[str]] = {}

    def run_one(child: str, finished: list[str]) -> str:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        seen[child] = list(finished)
        time.sleep(hold_s)
        with lock:
            state["now"] -= 1
        return child.upper()

    return run_one, state, seen


def test_children_run_at_once_up_to_the_bound_and_return_in_spec_order():
    run_one, state, _ = _scheduler_probe()
    children = [f"c{i}" for i in range(7)]
    results = run_children(run_one, children, at_once=3, waits_for_earlier=lambda c: False,
                           stop=threading.Event())
    assert results == [c.upper() for c in children]
    assert state["most"] == 3


def test_one_at_a_time_is_the_sequential_loop():
    run_one, state, seen = _scheduler_probe(hold_s=0)
    results = run_children(run_one, ["a", "b", "c"], at_once=1, waits_for_earlier=lambda c: False,
                           stop=threading.Event())
    assert results == ["A", "B", "C"] and state["most"] == 1
    assert seen == {"a": [], "b": ["A"], "c": ["A", "B"]}


def test_a_child_measured_from_earlier_ones_starts_after_all_of_them():
    """vote with token_budget_from: debate needs debate's finished run, as one after another."""
    run_one, _, seen = _scheduler_probe()
    children = ["debate0", "debate1", "vote0", "other"]
    results = run_children(run_one, children, at_once=4, waits_for_earlier=lambda c: c.startswith("vote"),
                           stop=threading.Event())
    assert results == ["DEBATE0", "DEBATE1", "VOTE0", "OTHER"]
    assert seen["vote0"] == ["DEBATE0", "DEBATE1"]
    assert seen["debate0"] == seen["debate1"] == []


def test_the_first_error_stops_the_others_and_propagates():
    stop, started = threading.Event(), []

    def run_one(child: str, finished: list[str]) -> str:
        started.append(child)
        if child == "bad":
            raise ServiceError("endpoint failed mid-run")
        assert stop.wait(5), "the stop never came"  # a running child sees it and ends
        return child

    with pytest.raises(ServiceError):
        run_children(run_one, ["good", "bad", "never"], at_once=2, waits_for_earlier=lambda c: False,
                     stop=stop)
    assert stop.is_set() and "never" not in started


def _memory_scripts(problems, hold=None):
    """The coder fails a problem's first attempt when its id is odd, and passes after a reflection."""
    scripted = ScriptedProblems(problems)

    def coder(text):
        if hold is not None:
            hold()
        task = scripted.problem_in(text).task_id
        fails = int(task.rsplit("/", 1)[1]) % 2 == 1 and "[this task, attempt" not in text
        return {"code": scripted.wrong(text) if fails else scripted.solution(text)}

    def reflector(text):
        return {"what_went_wrong": "an edge case", "what_worked": "the examples",
                "pattern": "edge cases", "lesson": "Check the empty input before anything else."}

    return {"coder": coder, "reflector": reflector}


def _memory_spec(api_base, parallel_runs, limit=4):
    memory = {"enabled": True, "approval": "auto", "store": "parallel_runs"}
    pipelines = [
        {"name": "baseline"},
        {"name": "baseline", "label": "baseline+memory", "memory": memory},
        {"name": "reflexion", "label": "reflexion+memory", "params": {"max_trials": 2},
         "memory": {**memory, "reflect": False}},
    ]
    # concurrency 1: what is in flight at once beyond one request is the children's doing
    return fake_spec(api_base, pipelines=pipelines, limit=limit, seeds=[0, 1], order_seed=3,
                     parallel_runs=parallel_runs, concurrency=1, pool={"persist": False})


def _tables(result):
    return {(c.pipeline, c.seed): [
        (r.task_id, r.status, r.final_code, r.lm_calls, r.total_tokens) for r in c.results
    ] for c in result.children}


def _requests(fake):
    """The model requests, the ids of memory entries and skills aside (random, so they differ
    between any two runs)."""
    return Counter(re.sub(r"\b([ms])-[0-9a-f]{10,12}\b", r"\1-ID", json.dumps(r, sort_keys=True))
                   for r in fake.requests if PROBE not in json.dumps(r.get("messages", [])))


def test_memory_runs_at_once_give_the_same_tables_and_requests(tmp_path, monkeypatch, humaneval_problems):
    lock, flight = threading.Lock(), {"now": 0, "most": 0}

    def hold():  # long enough for two children's requests to meet
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        time.sleep(0.05)
        with lock:
            flight["now"] -= 1

    scripts = role_responder(_memory_scripts(humaneval_problems, hold))
    outcomes = {}
    for parallel_runs in (1, 3):
        monkeypatch.setenv("CRITIQUELAB_HOME", str(tmp_path / f"home{parallel_runs}"))
        flight.update(now=0, most=0)
        with FakeOpenAIServer(scripts) as fake:
            result = run(_memory_spec(fake.api_base, parallel_runs), progress=False, compare=False)
            outcomes[parallel_runs] = (_tables(result), _requests(fake), flight["most"],
                                       [(c.pipeline, c.seed) for c in result.children])
    sequential, at_once = outcomes[1], outcomes[3]
    assert at_once[0] == sequential[0]  # every problem's status, code, calls and tokens
    assert at_once[1] == sequential[1]  # the very same requests, memory's injections included
    assert at_once[3] == sequential[3]  # children in the spec's order
    assert sequential[2] == 1 and at_once[2] >= 2
    memory_rows = sequential[0][("baseline+memory", 1)]
    assert len(memory_rows) == 4 and any("attempt" in json.dumps(r) for r in sequential[1])


class _FailsAfter:
    """Healthy until ``after`` completions, then HTTP 500 until healed."""

    def __init__(self, healthy, after):
        self.healthy, self.after, self.calls, self.broken = healthy, after, 0, True
        self.lock = threading.Lock()

    def __call__(self, messages):
        with self.lock:
            self.calls += 1
            failing = self.broken and self.calls > self.after
        return HttpError(500, "internal server error") if failing else self.healthy(messages)


def _plain_spec(api_base, parallel_runs):
    """Children without memory: a resumed one is the same as one never stopped (with memory, a
    problem stopped half-way may have written entries that its redo writes again)."""
    pipelines = [{"name": "baseline"}, {"name": "reflexion", "params": {"max_trials": 2}}]
    return fake_spec(api_base, pipelines=pipelines, limit=4, seeds=[0, 1], concurrency=1,
                     parallel_runs=parallel_runs, pool={"persist": False})


def test_a_child_failing_mid_run_stops_the_others_and_the_same_command_resumes(
    tmp_path, monkeypatch, humaneval_problems,
):
    home = tmp_path / "home"
    monkeypatch.setenv("CRITIQUELAB_HOME", str(home))
    responder = _FailsAfter(role_responder(_memory_scripts(humaneval_problems)), after=6)
    with FakeOpenAIServer(responder) as fake:
        spec = _plain_spec(fake.api_base, parallel_runs=3)
        spec["model"]["num_retries"] = 0
        started = time.monotonic()
        with pytest.raises(ServiceError):
            run(spec, progress=False, compare=False)
        assert time.monotonic() - started < 30
        statuses = [r.info.status for r in Tracker(home, "test-experiment").runs_tagged({})]
        assert "KILLED" in statuses and set(statuses) <= {"KILLED", "FINISHED"}
        checkpointed = sum(len(f.read_text().splitlines()) for f in (home / "checkpoints").rglob("*.jsonl"))
        assert 0 < checkpointed < 16  # some problems finished, and the stop came before the rest
        responder.broken = False  # the endpoint is fixed: the same command finishes the run
        resumed = run(spec, progress=False, compare=False)
    monkeypatch.setenv("CRITIQUELAB_HOME", str(tmp_path / "sequential"))
    with FakeOpenAIServer(role_responder(_memory_scripts(humaneval_problems))) as fake:
        sequential = run(_plain_spec(fake.api_base, parallel_runs=1), progress=False, compare=False)
    assert _tables(resumed) == _tables(sequential)


def test_a_child_measured_from_another_gets_the_same_budget_at_once(
    tmp_path, monkeypatch, humaneval_problems,
):
    """vote's token_budget_from baseline is resolved from the finished baseline runs either way."""
    from support.fake_openai import humaneval_responder

    budgets = {}
    for parallel_runs in (1, 4):
        monkeypatch.setenv("CRITIQUELAB_HOME", str(tmp_path / f"home{parallel_runs}"))
        pipelines = [{"name": "baseline"},
                     {"name": "vote", "params": {"token_budget_from": "baseline", "max_samples": 4}}]
        with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
            result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=2, seeds=[0, 1],
                                   parallel_runs=parallel_runs, pool={"persist": False}),
                         progress=False, compare=False)
        budgets[parallel_runs] = [(c.pipeline, c.seed, c.results[0].resolved_params) for c in result.children]
    assert budgets[4] == budgets[1]
    assert all(resolved.token_budget for label, _, resolved in budgets[1] if label == "vote")


def test_memory_runs_starting_together_each_open_their_store(tmp_path, monkeypatch, humaneval_problems):
    """Chroma makes its per-directory client without a lock: six memory runs opening the store at
    the same moment failed with "Could not connect to tenant" until opening was serialised."""
    monkeypatch.setenv("CRITIQUELAB_HOME", str(tmp_path / "home"))
    memory = {"enabled": True, "approval": "auto", "store": "together", "reflect": False}
    pipelines = [{"name": "baseline", "label": "a", "memory": memory},
                 {"name": "baseline", "label": "b", "memory": memory}]
    with FakeOpenAIServer(role_responder(_memory_scripts(humaneval_problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=1, seeds=[0, 1, 2],
                               parallel_runs=6, pool={"persist": False}), progress=False, compare=False)
    assert [(c.pipeline, c.seed, len(c.results)) for c in result.children] == [
        (label, seed, 1) for label in ("a", "b") for seed in (0, 1, 2)]
