"""Parallel agents change when a problem's role calls are made, never what they ask or what the
problem's results are: debate and vote run one call at a time and several at once against a
scripted endpoint whose replies come back in random order, from empty LM caches and from each
other's cache."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer, HttpError
from support.role_responder import role_of, role_responder

from critiquelab.core.errors import ServiceError
from critiquelab.core.usage import UsageMeter, current_meter, metering
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.parallel_agents import ParallelCalls
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return a - b"
BASE_SEED = 7


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def _debate_scripts():
    """Every reply depends on the whole request, so a request that differed in any way (another
    order of the neighbours' proposals or of the judge's transcript) would change the results."""

    def coder(text, body):  # debater/sample index = seed - BASE_SEED * 1000 (sampling_config)
        return {"code": BAD if body["seed"] % 1000 in (0, 3) else GOOD}

    def debater(text, body):
        digest = _digest(text)
        return {"argument": f"argument {digest % 10**8}", "revised_code": GOOD if digest % 3 else BAD}

    def judge(text, body):
        digest = _digest(text)
        return {"choice": str(digest % 3 + 1), "rationale": f"because {digest % 10**6}", "merged_code": ""}

    return {"coder": coder, "debater": debater, "judge": judge}


def _run(name, scripts, cache_dir, *, jitter_s=0.12, max_tokens=200, **params):
    """One problem through pipeline ``name``; returns what the tests compare."""
    pool, meter = MessagePool(), UsageMeter()
    # Every answer takes at least 0.1 s, so calls submitted together overlap even on a loaded
    # machine; the jitter on top makes them come back in an order of their own.
    with FakeOpenAIServer(role_responder(scripts, with_body=True), delay_s=0.1, pass_body=True,
                          jitter_s=jitter_s) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=cache_dir, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=max_tokens, num_retries=0, seed=BASE_SEED)
        pipeline = create_pipeline(name, **params)
        with dspy.context(lm=lm, adapter=CodeAdapter(), trace=[]), using_pool(pool), metering(meter):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
            trace = list(dspy.settings.trace)
        lm.close()
    return {
        "prediction": prediction,
        "history": pool.history(thread_id=prediction.outcome.thread_id),
        "requests": list(fake.requests),
        "max_in_flight": fake.max_in_flight,
        "usage": {role: (u.calls, u.prompt_tokens, u.completion_tokens) for role, u in meter.by_role.items()},
        "cached_calls": meter.total().cached_calls,
        "calls_by_predictor": _calls_by_predictor(pipeline, trace),
    }


def _calls_by_predictor(pipeline, trace):
    """Each predictor's traced calls in trace order: what BootstrapFewShot picks a demo from."""
    names = {id(predictor): name for name, predictor in pipeline.named_predictors()}
    calls = {}
    for predictor, inputs, outputs in trace:
        calls.setdefault(names[id(predictor)], []).append(
            json.dumps([dict(inputs), dict(outputs)], sort_keys=True, default=str))
    return calls


def _outcome(run):
    """What a problem's table row is made of (the runner scores these codes)."""
    prediction = run["prediction"]
    outcome = {name: value for name, value in prediction.outcome if name != "thread_id"}  # a new thread each
    return {"code": prediction.code, "outcome": outcome, "usage": run["usage"]}


def _per_agent(requests):
    """Each request by the agent and step that made it: (role, seed) is unique per role call."""
    keyed = {(role_of(r["messages"]), r["seed"]): json.dumps(r, sort_keys=True) for r in requests}
    assert len(keyed) == len(requests)
    return keyed


def _messages(history):
    """The thread's messages as agents see them, by agent and step rather than by arrival."""
    return sorted(
        (m.intent, m.sender.split("@")[0], m.content, m.summary,
         json.dumps({k: v for k, v in m.metadata.items() if k not in ("seq", "trace")}, sort_keys=True),
         json.dumps(m.metadata.get("trace", {}).get("inputs"), sort_keys=True))
        for m in history
    )


@pytest.mark.parametrize(("name", "params", "parallel"), [
    ("debate", {"debaters": 3, "rounds": 2}, 3),
    ("debate", {"debaters": 4, "rounds": 2, "topology": "ring"}, 2),
    ("vote", {"k": 5}, 5),
])
def test_parallel_agents_ask_the_same_and_get_the_same_results(tmp_path, name, params, parallel):
    scripts = _debate_scripts()
    sequential = _run(name, scripts, tmp_path / "sequential", **params, parallel_agents=1)
    concurrent = _run(name, scripts, tmp_path / "concurrent", **params, parallel_agents=parallel)

    assert sequential["max_in_flight"] == 1
    assert concurrent["max_in_flight"] >= 2  # the calls really overlapped
    assert Counter(json.dumps(r, sort_keys=True) for r in concurrent["requests"]) == Counter(
        json.dumps(r, sort_keys=True) for r in sequential["requests"]
    )
    assert _per_agent(concurrent["requests"]) == _per_agent(sequential["requests"])
    assert _outcome(concurrent) == _outcome(sequential)
    assert _messages(concurrent["history"]) == _messages(sequential["history"])
    # An optimiser tracing the run sees each role's calls in the sequential order.
    assert concurrent["calls_by_predictor"] == sequential["calls_by_predictor"]
    assert sum(map(len, sequential["calls_by_predictor"].values())) > len(sequential["calls_by_predictor"])

    # The sequential run's cache answers every call of a concurrent run: same requests, same keys.
    replayed = _run(name, scripts, tmp_path / "sequential", **params, parallel_agents=parallel)
    assert replayed["requests"] == []
    assert _outcome(replayed) == _outcome(sequential)
    assert replayed["cached_calls"] == sum(calls for calls, _, _ in sequential["usage"].values())


def test_debate_results_are_in_debater_order_and_tokens_per_role_add_up(tmp_path):
    run = _run("debate", _debate_scripts(), tmp_path / "cache", debaters=3, rounds=2, parallel_agents=3)
    prediction, history = run["prediction"], run["history"]
    # Debater 0 drew seed 0.
    assert prediction.outcome.codes_to_score["debaters_first_passed"] == [BAD, GOOD, GOOD]
    assert len(prediction.outcome.codes_to_score["debaters_final_passed"]) == 3
    calls = {role: calls for role, (calls, _, _) in run["usage"].items()}
    assert calls == {"coder": 3, "debater": 6, "judge": 1}
    traced = Counter()
    for message in history:
        trace = message.metadata.get("trace")
        if trace:
            traced[trace["role"]] += trace["usage"]["prompt_tokens"] + trace["usage"]["completion_tokens"]
    assert traced == {role: p + c for role, (_, p, c) in run["usage"].items()}
    judge = next(m for m in history if m.intent == Intent.VERDICT)
    transcript = judge.metadata["trace"]["inputs"]["transcript"].splitlines()
    assert [line.split(":")[0] for line in transcript] == [
        f"Round {r}, debater {d}" for r in (1, 2) for d in (1, 2, 3)
    ]


def test_vote_samples_are_published_and_scored_in_sample_order(tmp_path):
    run = _run("vote", _debate_scripts(), tmp_path / "cache", k=5, parallel_agents=5, jitter_s=0.3)
    proposals = [m for m in run["history"] if m.intent == Intent.PROPOSAL]
    assert [m.metadata["sample"] for m in proposals] == [0, 1, 2, 3, 4]
    assert [m.metadata["trace"]["inputs"] for m in proposals] == [{"prompt": PROMPT}] * 5
    assert run["prediction"].outcome.codes_to_score["samples_passed"] == [BAD, GOOD, GOOD, BAD, GOOD]
    # Requests arrive in the order they were sent; replies came back in another.
    assert sorted(r["seed"] for r in run["requests"]) == [BASE_SEED * 1000 + i for i in range(5)]


def test_vote_under_a_token_budget_draws_the_same_samples_in_parallel(tmp_path):
    scripts = _debate_scripts()
    one = _run("vote", scripts, tmp_path / "one", k=1, max_tokens=40, parallel_agents=1)
    per_sample = sum(p + c for _, p, c in one["usage"].values())
    params = {"token_budget": 5.5 * per_sample, "max_samples": 10}
    sequential = _run("vote", scripts, tmp_path / "sequential", max_tokens=40, **params, parallel_agents=1)
    concurrent = _run("vote", scripts, tmp_path / "concurrent", max_tokens=40, **params, parallel_agents=4)
    assert sequential["prediction"].outcome.samples == 6
    assert concurrent["max_in_flight"] >= 2
    assert _outcome(concurrent) == _outcome(sequential)
    assert _per_agent(concurrent["requests"]) == _per_agent(sequential["requests"])


def test_vote_budget_refuses_an_endpoint_that_exceeds_max_tokens(tmp_path):
    """Drawing ahead under a budget trusts that no reply is longer than max_tokens; an endpoint
    that reports more would make the samples drawn depend on timing, so it is a service fault."""
    long_reply = {"coder": lambda text, body: {"code": GOOD + "\n" + "# padding\n" * 60}}
    with pytest.raises(ServiceError, match="max_tokens"):
        _run("vote", long_reply, None, max_tokens=40, token_budget=5000.0, parallel_agents=3)
    sequential = _run("vote", long_reply, None, max_tokens=40, token_budget=500.0, parallel_agents=1)
    assert sequential["prediction"].outcome.samples >= 1


def test_a_failing_agent_fails_the_problem_at_once(tmp_path):
    """Debater 1's proposal fails while the others are still being answered: the problem fails
    with the endpoint's error as it would one call at a time, without waiting for the others."""
    release = threading.Event()
    scripts = _debate_scripts()

    def coder(text, body):
        if body["seed"] % 1000 == 1:
            return HttpError(500, "internal server error")
        release.wait(20)
        return scripts["coder"](text, body)

    started = time.monotonic()
    try:
        with pytest.raises(ServiceError, match="internal server error"):
            _run("debate", {**scripts, "coder": coder}, None, jitter_s=0, debaters=3, rounds=1,
                 parallel_agents=3)
        took = time.monotonic() - started
    finally:
        release.set()
    assert took < 10


def test_parallel_calls_run_in_the_callers_context_and_inline_when_one():
    meter = UsageMeter()
    with metering(meter), ParallelCalls(3) as calls:
        seen = [calls.submit(lambda: (threading.current_thread().name, current_meter() is meter))
                for _ in range(3)]
        results = [f.result() for f in seen]
    assert all(same for _, same in results)
    assert all(name.startswith("critiquelab-agent") for name, _ in results)
    with ParallelCalls(1) as calls:
        assert calls.submit(lambda: threading.current_thread()).result() is threading.current_thread()
        with pytest.raises(ZeroDivisionError):
            calls.submit(lambda: 1 / 0)  # inline: raised where it is submitted, as a plain call



def test_an_optimisers_trace_gets_concurrent_calls_in_submission_order():
    # BootstrapFewShot picks a role's demo by its position among the role's traced calls: the
    # slow first call must stay first although the second returns before it.
    def call(index: int, delay: float) -> int:
        time.sleep(delay)
        dspy.settings.trace.append(index)
        return index

    with dspy.context(trace=[]):
        dspy.settings.trace.append("before")
        with ParallelCalls(2) as calls:
            futures = [calls.submit(call, 0, 0.5), calls.submit(call, 1, 0.0)]
            assert ParallelCalls.finished(futures) == {futures[1]}
        assert dspy.settings.trace == ["before", 0, 1]
    with dspy.context(trace=None), ParallelCalls(2) as calls:  # tracing off stays off
        assert calls.submit(lambda: dspy.settings.trace).result() is None
    with dspy.context(trace=[], max_trace_size=2):  # DSPy's bound on a trace holds
        with ParallelCalls(2) as calls:
            for index in range(3):
                calls.submit(call, index, 0.0)
        assert dspy.settings.trace == [1, 2]
