"""The set-up's llama-server on the real bundled model: one answer through the harness's LM
client with its usage, a prompt too long for a slot as the context error the roles expect, and
the process gone when the block ends."""

import pytest
from dspy.utils.exceptions import ContextWindowExceededError

from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.experiments.serving.local_server import LocalModelServer, select_backend
from critiquelab.experiments.serving.model_files import ensure_model_file, resolve_bundled
from critiquelab.experiments.serving.server_build import find_built_server

pytestmark = pytest.mark.e2e


def test_llama_server_answers_through_harness_lm_and_stops(tmp_path):
    built = find_built_server()
    if built is None:
        pytest.skip("llama-server was not built (scripts/build_llama_server.sh)")
    bundled = resolve_bundled("local")
    assert bundled is not None
    model = ensure_model_file(bundled)
    server = LocalModelServer(
        model, "local@e2e", backend=select_backend("auto", built), n_ctx=512, slots=2,
        log_path=tmp_path / "server.log",
    )
    with server:
        process = server._process
        assert process is not None and process.poll() is None
        lm = HarnessLM(
            "openai/local@e2e", api_base=server.api_base, api_key="local", identity="local:e2e",
            cache_dir=tmp_path / "cache", temperature=0.0, max_tokens=8, num_retries=0, timeout=120,
        )
        meter = UsageMeter()
        with metering(meter):
            outputs = lm("Reply with the word OK.")
        assert outputs and str(outputs[0]).strip()
        usage = meter.total()
        assert usage.calls == 1 and usage.cached_calls == 0
        assert usage.prompt_tokens > 5 and 0 < usage.completion_tokens <= 8

        with pytest.raises(ContextWindowExceededError):  # 512 tokens per slot
            lm("word " * 800, cache=False)
        lm.close()
    assert process.poll() is not None  # stopped with the block
