"""call_role: a reply the role cannot use is not kept in the LM cache; a usable one is."""

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer, chat_reply

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.runtime.role_call import call_role
from critiquelab.signatures.adapter import CodeAdapter
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.critic import Critic

PROMPT = 'def add(a, b):\n    """Add."""\n'
REVIEW_INPUTS = {"prompt": PROMPT, "code": PROMPT, "execution_feedback": "none"}


@pytest.mark.parametrize(("reply", "kept"), [
    ("```python\ndef add(a, b):\n    return a + b\n```", True),
    ("I cannot help with that request, sorry.", False),  # prose: no code where code was asked for
])
def test_a_coder_reply_is_kept_only_when_it_holds_code(tmp_path, reply, kept):
    with FakeOpenAIServer(lambda messages: reply) as fake:
        lm = HarnessLM("openai/fake", identity="e", cache_dir=tmp_path / "cache", api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=50, num_retries=0)
        with dspy.context(lm=lm, adapter=CodeAdapter()):
            for _ in range(2):
                call_role(dspy.Predict(Coder), "coder", prompt=PROMPT)
        assert fake.completions == (1 if kept else 2)


def test_an_unparsed_review_is_not_kept(tmp_path):
    with FakeOpenAIServer(lambda messages: "no sections at all") as fake:
        lm = HarnessLM("openai/fake", identity="e", cache_dir=tmp_path / "cache", api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=50, num_retries=0)
        with dspy.context(lm=lm, adapter=CodeAdapter()):
            first = call_role(dspy.Predict(Critic), "critic", **REVIEW_INPUTS)
            asked = fake.completions
            call_role(dspy.Predict(Critic), "critic", **REVIEW_INPUTS)
        assert not first.parsed and asked >= 1 and fake.completions == 2 * asked


def test_a_parsed_review_is_kept(tmp_path):
    review = chat_reply(verdict="approve", findings="[]", summary="fine")
    with FakeOpenAIServer(lambda messages: review) as fake:
        lm = HarnessLM("openai/fake", identity="e", cache_dir=tmp_path / "cache", api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=50, num_retries=0)
        with dspy.context(lm=lm, adapter=CodeAdapter()):
            for _ in range(2):
                step = call_role(dspy.Predict(Critic), "critic", **REVIEW_INPUTS)
                assert step.parsed and step.verdict == "approve" and step.summary == "fine"
        assert fake.completions == 1
        with pytest.raises(AttributeError, match="Critic has no output 'verdcit'"):
            _ = step.verdcit
