"""Prompt-prefix reuse: what the server reports as taken from its cache (llama-server's
``prompt_tokens_details.cached_tokens``) is summed per run into ``prompt_reuse_ratio``; a
server that does not report it gets no ratio; a cached replay reports what the call reported
when it was made, like its tokens."""

from __future__ import annotations

import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder
from support.specs import fake_spec

from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.api import run
from critiquelab.experiments.serving.lm import HarnessLM


def _coder(text: str) -> dict[str, str]:
    # Every sample the same right-looking answer: the test is about usage, not pass@1.
    signature = next(line for line in text.splitlines() if line.startswith("def "))
    return {"code": f"{signature}\n    return 0\n"}


def _vote_spec(api_base: str) -> dict:
    return fake_spec(
        api_base, limit=2, pool={"persist": False},
        pipelines=[{"name": "vote", "params": {"k": 3}}],
    )


def test_a_run_logs_the_share_of_prompt_tokens_the_server_reused(tmp_path) -> None:
    with FakeOpenAIServer(role_responder({"coder": _coder}), prefix_cache=True) as server:
        result = run(_vote_spec(server.api_base), home=tmp_path, progress=False)
    (child,) = result.children
    metrics = child.metrics
    # The server's own tally of what it reported (minus the one-token preflight probe's zero).
    assert metrics["prompt_tokens_reused"] == server.reused_tokens > 0
    assert metrics["prompt_tokens_reused"] + metrics["prompt_tokens_evaluated"] == metrics["prompt_tokens"]
    assert metrics["prompt_reuse_ratio"] == pytest.approx(server.reused_tokens / metrics["prompt_tokens"])
    # vote's three samples of one problem send the same prompt: the 2nd and 3rd reuse all but one
    # token of it, so well over half of all prompt tokens are reused.
    assert metrics["prompt_reuse_ratio"] > 0.6


def test_no_ratio_is_claimed_for_a_server_that_does_not_report_reuse(tmp_path) -> None:
    with FakeOpenAIServer(role_responder({"coder": _coder})) as server:
        result = run(_vote_spec(server.api_base), home=tmp_path, progress=False)
    (child,) = result.children
    assert child.metrics["prompt_tokens"] > 0
    assert not {"prompt_reuse_ratio", "prompt_tokens_reused", "prompt_tokens_evaluated"} & set(child.metrics)


def test_a_cached_reply_reports_the_reuse_recorded_when_it_was_made(tmp_path) -> None:
    messages = [{"role": "system", "content": "one two three four"}, {"role": "user", "content": "five"}]
    with FakeOpenAIServer(lambda _: "reply", prefix_cache=True) as server:
        lm = HarnessLM("openai/fake", api_base=server.api_base, api_key="x", identity="t",
                       cache_dir=tmp_path, num_retries=0)
        lm(messages=[*messages[:1], {"role": "user", "content": "six"}])  # primes the server's cache
        made, replayed = UsageMeter(), UsageMeter()
        with metering(made):
            lm(messages=messages)
        with metering(replayed):
            lm(messages=messages)
        lm.close()
    assert server.completions == 2  # the third call came from the LM cache
    first, again = made.total(), replayed.total()
    assert (first.reused_prompt_tokens, first.reuse_reported_prompt_tokens) == (4, 5)
    assert (again.reused_prompt_tokens, again.reuse_reported_prompt_tokens) == (4, 5)
    assert again.cached_calls == 1
