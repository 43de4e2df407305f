"""HarnessLM: the cache key includes the endpoint identity; cached calls keep their usage."""

import json

import dspy
import pytest
from dspy.utils.exceptions import ContextWindowExceededError
from support.fake_openai import FakeOpenAIServer, HttpError, RawReply, Trickle, llama_server_overflow

from critiquelab.core.errors import ServiceError
from critiquelab.core.usage import UsageMeter, acting_as, metering
from critiquelab.experiments.serving.lm import HarnessLM


def _lm(fake, tmp_path, identity):
    return HarnessLM("openai/fake", identity=identity, cache_dir=tmp_path / "cache",
                     api_base=fake.api_base, api_key="x", temperature=0.0, max_tokens=50)


def test_cache_hit_reports_original_usage_and_makes_no_request(tmp_path):
    with FakeOpenAIServer(lambda messages: "hello there") as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        first, second = UsageMeter(), UsageMeter()
        with metering(first), acting_as("coder"):
            assert lm("hi") == ["hello there"]
        with metering(second), acting_as("coder"):
            assert lm("hi") == ["hello there"]
        assert fake.completions == 1
    a, b = first.by_role["coder"], second.by_role["coder"]
    assert (a.calls, a.cached_calls, b.calls, b.cached_calls) == (1, 0, 1, 1)
    assert a.prompt_tokens > 0
    assert (a.prompt_tokens, a.completion_tokens) == (b.prompt_tokens, b.completion_tokens)


def test_other_endpoint_identity_does_not_share_entries(tmp_path):
    with FakeOpenAIServer(lambda messages: "reply") as fake:
        _lm(fake, tmp_path, "endpoint-a")("hi")
        _lm(fake, tmp_path, "endpoint-b")("hi")
        _lm(fake, tmp_path, "endpoint-a")("hi", temperature=0.7)  # other params: other entry
        assert fake.completions == 3


def test_the_same_request_made_at_once_is_asked_once(tmp_path):
    """Two copies (two runs' first problems) asking the same thing together: the second waits for
    the first's answer and replays it; a different request does not wait."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    def slow(messages):
        time.sleep(0.3)
        return f"reply to {messages[-1]['content']}"

    with FakeOpenAIServer(slow) as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        copies = [lm.copy() for _ in range(3)]
        barrier = threading.Barrier(4)

        def ask(args):
            model, text = args
            barrier.wait()
            return model(text)

        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(ask, [(copies[0], "hi"), (copies[1], "hi"), (copies[2], "hi"),
                                          (lm, "other")]))
        assert replies == [["reply to hi"]] * 3 + [["reply to other"]]
        assert fake.completions == 2
        assert fake.max_in_flight == 2  # "other" did not wait behind "hi"


def test_cache_false_bypasses(tmp_path):
    with FakeOpenAIServer(lambda messages: "reply") as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        lm("hi")
        lm("hi", cache=False)
        assert fake.completions == 2


def test_works_inside_a_dspy_predict(tmp_path):
    with FakeOpenAIServer(lambda m: "[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]") as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        with dspy.context(lm=lm):
            assert dspy.Predict("question -> answer")(question="?").answer == "42"


def test_llama_server_context_overflow_is_the_prompts_fault_not_the_endpoints(tmp_path):
    """llama-server's overflow reply is a context error (the role records an unparsed step); any
    other rejected request still stops the run as an endpoint failure."""
    replies = iter([llama_server_overflow(), HttpError(400, "unsupported parameter: foo")])
    with FakeOpenAIServer(lambda messages: next(replies)) as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        with pytest.raises(ContextWindowExceededError, match="exceeds the available context size"):
            lm("a long prompt")
        with pytest.raises(ServiceError, match="unsupported parameter"):
            lm("another prompt")


def test_refresh_asks_again_and_its_answer_replaces_the_cached_one(tmp_path):
    replies = iter(["old answer", "new answer"])
    with FakeOpenAIServer(lambda messages: next(replies)) as fake:
        assert _lm(fake, tmp_path, "endpoint-a")("hi") == ["old answer"]
        refreshing = HarnessLM("openai/fake", identity="endpoint-a", cache_dir=tmp_path / "cache",
                               refresh=True, api_base=fake.api_base, api_key="x", temperature=0.0,
                               max_tokens=50)
        assert refreshing("hi") == ["new answer"]
        assert _lm(fake, tmp_path, "endpoint-a")("hi") == ["new answer"]  # replayed, not asked
        assert fake.completions == 2


def test_a_reply_forgotten_by_its_caller_is_asked_for_again(tmp_path):
    with FakeOpenAIServer(lambda messages: "prose, no code") as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        meter = UsageMeter()
        with metering(meter):
            lm("hi")
            assert lm("hi") == ["prose, no code"] and fake.completions == 1  # cached so far
            assert meter.forget_replies() == 2  # the asked and the replayed call alike
        lm("hi")
        assert fake.completions == 2


def test_each_exchange_records_the_settings_that_decide_its_reply_live_and_replayed(tmp_path):
    with FakeOpenAIServer(lambda messages: "reply") as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        live, replayed = UsageMeter(), UsageMeter()
        for meter in (live, replayed):
            with metering(meter), acting_as("coder"):
                lm("hi", temperature=0.8, seed=3)
    for meter in (live, replayed):
        (exchange,) = meter.exchanges
        assert exchange["settings"] == {"temperature": 0.8, "max_tokens": 50, "seed": 3}
        assert exchange["replies"] == ["reply"]


def test_a_retry_waits_no_longer_than_the_cap_whatever_retry_after_asks(tmp_path, monkeypatch):
    """An endpoint's 429 asking for a day's wait: DSPy would sleep that long; the harness retries
    itself after at most MAX_RETRY_WAIT_S, then gets its answer."""
    from critiquelab.experiments.serving import lm as lm_module

    slow_down = RawReply(json.dumps({"error": {"message": "slow down", "type": "rate_limit"}}).encode(),
                         status=429, headers={"Retry-After": "100000"})
    replies = iter([slow_down, slow_down, "the answer"])
    waits: list[float] = []
    monkeypatch.setattr(lm_module.time, "sleep", waits.append)
    with FakeOpenAIServer(lambda messages: next(replies)) as fake:
        lm = HarnessLM("openai/fake", identity="e", cache_dir=tmp_path / "cache", api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=50, num_retries=2)
        assert lm("hi") == ["the answer"]
        assert fake.completions == 3
    assert waits == [lm_module.MAX_RETRY_WAIT_S] * 2
    # the start-up probe's copy retries nothing: the first refusal is its answer
    replies = iter([slow_down])
    with FakeOpenAIServer(lambda messages: next(replies)) as fake:
        probe = HarnessLM("openai/fake", identity="p", cache_dir=None, api_base=fake.api_base,
                          api_key="x", num_retries=2).copy(num_retries=0)
        with pytest.raises(ServiceError, match="slow down"):
            probe("hi")
        assert fake.completions == 1


def test_a_reply_trickled_a_byte_at_a_time_is_bounded_by_the_whole_requests_timeout(tmp_path):
    """The transport's timeout bounds each wait for the next byte; an endpoint that never stops
    trickling would hold a run for ever without a bound on the whole request."""
    import time

    with FakeOpenAIServer(lambda messages: Trickle(0.2)) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", num_retries=1, timeout=1.5)
        started = time.monotonic()
        with pytest.raises(ServiceError, match=r"no answer within 1\.5 s \(model.timeout_s"):
            lm("hi")
        took = time.monotonic() - started
        assert fake.completions == 2  # the request and its one retry, each given up at 1.5 s
    assert 3.0 <= took < 8.0, took


def test_a_call_bounded_by_the_whole_requests_timeout_keeps_the_callers_context(tmp_path):
    """The request runs in a thread of its own; the usage DSPy tracks in the caller's context
    still reaches the role's meter."""
    with FakeOpenAIServer(lambda messages: "the answer") as fake:
        lm = HarnessLM("openai/fake", identity="c", cache_dir=None, api_base=fake.api_base,
                       api_key="x", timeout=30.0)
        meter = UsageMeter()
        with metering(meter), acting_as("coder"):
            assert lm("hi") == ["the answer"]
    usage = meter.by_role["coder"]
    assert usage.calls == 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_a_reply_cut_at_max_tokens_is_counted_live_and_replayed(tmp_path):
    long_reply = " ".join(["word"] * 80)  # more than the LM's max_tokens (50)
    with FakeOpenAIServer(lambda messages: long_reply if "long" in str(messages) else "short reply",
                          cuts_at_max_tokens=True) as fake:
        lm = _lm(fake, tmp_path, "endpoint-a")
        live, replayed = UsageMeter(), UsageMeter()
        for meter in (live, replayed):
            with metering(meter), acting_as("debater"):
                lm("a long answer please")
                lm("a short one")
        assert fake.completions == 2
    for meter in (live, replayed):
        usage = meter.by_role["debater"]
        assert (usage.calls, usage.completion_tokens, usage.truncated_replies) == (2, 52, 1)
    assert replayed.by_role["debater"].cached_calls == 2
