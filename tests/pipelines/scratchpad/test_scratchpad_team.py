"""The scratchpad pipeline with a scripted LM (real HTTP, DSPy adapters, sandbox; fake model)."""

import dspy
from support.fake_openai import FakeOpenAIServer
from support.role_responder import review, role_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.runtime.scratchpad.events import ScratchpadIntent, UpdateEvent
from critiquelab.runtime.scratchpad.replay import replay
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return a - b"
ANALYSIS = {"approach": "return the sum", "edge_cases": '["negative numbers", "zero"]'}


def _solve(scripts, delay_s=0.0, **params):
    pool = MessagePool()
    with FakeOpenAIServer(role_responder(scripts), delay_s=delay_s) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=200, num_retries=0)
        pipeline = create_pipeline("scratchpad", **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
        max_in_flight = fake.max_in_flight
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), max_in_flight


def _updates(history):
    return [UpdateEvent.model_validate_json(m.content) for m in history
            if m.intent == ScratchpadIntent.UPDATE]


def _fixing_scripts(seen):
    def coder(text):
        seen.append(text)
        return {"code": GOOD if "FAIL: add(1, 2)" in text else BAD}

    def reviewer(text):
        return review("approve") if "PASS" in text else review("request_changes", "subtracts")

    return {"analyst": lambda t: ANALYSIS, "coder": coder, "critic": reviewer}


def test_sequential_team_revises_through_the_scratchpad_until_approved():
    seen = []
    prediction, history, _ = _solve(_fixing_scripts(seen))
    updates = _updates(history)
    assert [(u.channel, u.agent.split("@")[0]) for u in updates] == [
        ("analysis", "analyst"), ("code", "coder"), ("test_results", "tester"), ("reviews", "reviewer"),
        ("code", "coder"), ("test_results", "tester"), ("reviews", "reviewer"),
    ]
    assert (prediction.outcome.first_code, prediction.code) == (BAD, GOOD)
    assert prediction.outcome.stop_reason == "approved"
    assert prediction.outcome.reviews == 2 and prediction.outcome.fixes == 1
    assert prediction.outcome.changes_requested
    # The coder read the analysis first, and the test results and the review before revising.
    assert "return the sum" in seen[0] and "negative numbers" in seen[0]
    assert "FAIL: add(1, 2) returned -1, expected 3" in seen[1] and "subtracts" in seen[1]
    tests = [u.delta for u in updates if u.channel == "test_results"]
    assert [(t["passed"], t["examples"], t["code_version"]) for t in tests] == [(0, 1, 1), (1, 1, 2)]
    # Every role call left its trace on the event message it wrote.
    traced = [m.metadata["trace"]["role"] for m in history if "trace" in m.metadata]
    assert traced == ["analyst", "coder", "reviewer", "coder", "reviewer"]
    # Per-agent figures: calls, tokens, wall time, verdicts.
    metrics = prediction.outcome.figures()
    assert metrics["agent.coder.calls"] == 2 and metrics["agent.analyst.calls"] == 1
    assert metrics["agent.reviewer.verdict.request_changes"] == metrics["agent.reviewer.verdict.approve"] == 1
    assert metrics["agent.coder.prompt_tokens"] > 0 and metrics["agent.coder.wall_s"] > 0
    assert metrics["agent.coder.steps"] == 2
    # The state is the replay of the events.
    final = replay(history, "scratchpad")
    assert final.values["code"] == GOOD and len(final.values["reviews"]) == 2


def test_the_team_stops_at_max_iterations_and_a_last_review_gets_no_revision():
    scripts = {"analyst": lambda t: ANALYSIS, "coder": lambda t: {"code": BAD},
               "critic": lambda t: review("reject", "wrong")}
    prediction, history, _ = _solve(scripts, max_iterations=2)
    assert prediction.outcome.reviews == 2 and prediction.outcome.fixes == 1
    assert prediction.outcome.stop_reason == "max_iterations"
    assert [u.channel for u in _updates(history)][-1] == "reviews"


def test_reads_are_events_when_asked():
    _, history, _ = _solve(_fixing_scripts([]), log_reads=True)
    readers = {m.sender.split("@")[0] for m in history if m.intent == ScratchpadIntent.READ}
    assert readers == {"coder", "tester", "reviewer"}  # the analyst reads nothing: no read event


def test_an_unparseable_review_is_never_an_approval():
    scripts = {"analyst": lambda t: ANALYSIS, "coder": lambda t: {"code": BAD},
               "critic": lambda t: "LGTM!!! ship it"}
    prediction, history, _ = _solve(scripts)
    (entry,) = [u.delta for u in _updates(history) if u.channel == "reviews"]
    assert entry["verdict"] == "unparsed" and entry["summary"] == "LGTM!!! ship it"
    assert prediction.outcome.stop_reason == "unparsed_review" and prediction.outcome.parsed is False
    assert prediction.outcome.fixes == 0


def test_parallel_mode_starts_analyst_and_coder_together_and_ends_the_same():
    seen = []
    prediction, history, max_in_flight = _solve(_fixing_scripts(seen), delay_s=0.2, mode="parallel")
    assert max_in_flight >= 2  # the analyst's and the coder's first calls overlapped
    assert seen[0].count("empty") >= 1 and "return the sum" not in seen[0]  # drafted at once
    assert "return the sum" in seen[1]  # the revision reads the analysis
    assert (prediction.outcome.first_code, prediction.code) == (BAD, GOOD)
    assert prediction.outcome.stop_reason == "approved" and prediction.outcome.reviews == 2
    # Every event is on the pool, in the order it took effect: replay matches.
    assert replay(history, "scratchpad").values["code"] == GOOD
    assert [m.intent for m in history].count(Intent.TASK_ASSIGNMENT) == 1


def test_a_write_past_the_cap_is_refused_and_recorded_never_applied():
    seen = []
    scripts = _fixing_scripts(seen)
    scripts["coder"] = lambda t: (seen.append(t), {"code": BAD + "\n" + "#" * 400})[1]
    prediction, history, _ = _solve(scripts, max_size_kb=0.4, on_overflow="reject", max_iterations=2)
    refused = [m for m in history if m.intent == ScratchpadIntent.REFUSED]
    assert refused and prediction.outcome.scratchpad_refused == len(refused)
    assert all("over its cap" in m.content for m in refused)
    assert prediction.code == ""  # nothing was written: no code, and the run says so
    assert prediction.outcome.stop_reason == "no_review"
