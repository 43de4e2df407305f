"""The TextGrad engine sends exactly the configured endpoint settings, and caches on disk."""

import dspy
from support.fake_openai import FakeOpenAIServer

from critiquelab.optimizers.textgrad_engine import OpenAICompatibleEngine, engine_from_lm


def test_engine_passes_model_temperature_and_max_tokens_through(tmp_path):
    with FakeOpenAIServer(lambda messages: "pong") as fake:
        engine = OpenAICompatibleEngine(
            "my-model", base_url=fake.api_base, api_key="k", temperature=0.3, max_tokens=77,
            cache_dir=tmp_path / "cache",
        )
        assert engine("ping", system_prompt="be brief") == "pong"
        (body,) = fake.requests
        assert (body["model"], body["temperature"], body["max_tokens"]) == ("my-model", 0.3, 77)
        assert body["messages"] == [
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "ping"},
        ]
        assert engine("ping", system_prompt="be brief") == "pong"
        assert len(fake.requests) == 1 and engine.calls == 1  # the second answer came from disk
        hotter = OpenAICompatibleEngine(
            "my-model", base_url=fake.api_base, temperature=0.9, max_tokens=77, cache_dir=tmp_path / "cache",
        )
        hotter("ping", system_prompt="be brief")
        assert len(fake.requests) == 2  # a different request is a different cache key


def test_engine_from_lm_takes_the_lm_settings(tmp_path):
    lm = dspy.LM("openai/served", api_base="http://127.0.0.1:1/v1", api_key="x", temperature=0.2,
                 max_tokens=321, cache=False)
    engine = engine_from_lm(lm)
    body = engine.request("hi")
    assert (engine.model_string, engine.base_url, engine.api_key) == ("served", "http://127.0.0.1:1/v1", "x")
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("served", 0.2, 321)
    assert engine_from_lm(lm, max_tokens=5).request("hi")["max_tokens"] == 5
