"""role_play (CAMEL) with a scripted LM (real HTTP + DSPy adapters): the conversation's end —
done, max_turns — and each failure-mode detector stopping it with its reason."""

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.pipelines.role_play.agents import (
    assistant_flipped,
    instructor_flipped,
    no_progress,
    repeated,
)
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
GOOD = "def add(a: int, b: int) -> int:\n    return a + b"
BAD = "def add(a: int, b: int) -> int:\n    return a - b"


def _solve(scripts, **params):
    pool = MessagePool()
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base,
                       api_key="x", temperature=0.0, max_tokens=200, num_retries=0)
        pipeline = create_pipeline("role_play", **params)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
        requests = list(fake.requests)
    return prediction, pool.history(thread_id=prediction.outcome.thread_id), requests


def _instructor(text):
    """Done once the examples pass; otherwise a new instruction per turn (numbered by how many
    it gave before, as listed in its conversation field)."""
    if "PASS: add(1, 2)" in text:
        return {"instruction": "", "task_done": "True"}
    turn = 2 if "1. Step 1" in text else 1
    return {"instruction": f"Step {turn}: make add return the sum of a and b", "task_done": "False"}


def _assistant(text):
    return {"solution_code": GOOD if "Step 2" in text else BAD}


SCRIPTS = {
    "task_specifier": lambda t: {"specified_task": "Return a + b for two integers."},
    "instructor": _instructor,
    "assistant": _assistant,
}


def test_detectors():
    assert instructor_flipped("Here:\n```python\nreturn a + b\n```", "add")
    assert instructor_flipped("def add(a, b):\n    return a + b", "add")
    assert not instructor_flipped("Return the sum of a and b.", "add")
    assert assistant_flipped("Please tell me what to do next.")
    assert not assistant_flipped(GOOD)
    assert repeated("Handle  empty lists.", ["handle empty lists."]) and not repeated("Sort it.", ["Sort."])
    assert no_progress(GOOD + "\n", GOOD) and not no_progress(GOOD, BAD) and not no_progress(GOOD, None)


def test_turns_until_the_instructor_says_done():
    prediction, history, requests = _solve(SCRIPTS)
    assert [m.intent for m in history] == [
        Intent.TASK_ASSIGNMENT, Intent.TASK_SPECIFIED, Intent.INSTRUCTION, Intent.ANSWER, Intent.INSTRUCTION,
        Intent.ANSWER, Intent.STATUS,
    ]
    assert (prediction.outcome.first_code, prediction.code) == (BAD, GOOD)
    assert prediction.outcome.stop_reason == "done" and prediction.outcome.turns == 2
    assert (prediction.outcome.role_flips, prediction.outcome.repeated_instructions,
            prediction.outcome.no_progress_turns) == (0, 0, 0)
    # The instructor saw the visible example's result of the first answer, and the assistant
    # the specified task.
    second = [r for r in requests if "`task_done`" in r["messages"][0]["content"]][1]
    assert "FAIL: add(1, 2) returned -1, expected 3" in second["messages"][-1]["content"]
    assistant = next(r for r in requests if "`solution_code`" in r["messages"][0]["content"])
    assert "Return a + b for two integers." in assistant["messages"][-1]["content"]


def test_max_turns_ends_the_conversation():
    answers = []

    def assistant(text):  # a different wrong version each turn
        answers.append(text)
        return {"solution_code": BAD + f"  # v{len(answers)}"}

    prediction, history, _ = _solve({**SCRIPTS, "assistant": assistant,
                                     "instructor": lambda t: {"instruction": f"Try again {len(answers)}",
                                                              "task_done": "False"}}, max_turns=3)
    assert prediction.outcome.stop_reason == "max_turns" and prediction.outcome.turns == 3
    assert sum(m.intent == Intent.INSTRUCTION for m in history) == 3


@pytest.mark.parametrize(("scripts", "reason", "counter", "turns"), [
    ({"instructor": lambda t: {"instruction": "Write:\n```python\nreturn a + b\n```", "task_done": "False"}},
     "role_flip", "role_flips", 0),
    ({"assistant": lambda t: {"solution_code": "What should I do next? Please give me an instruction."}},
     "role_flip", "role_flips", 1),
    ({"instructor": lambda t: {"instruction": "Make it add.", "task_done": "False"},
      "assistant": lambda t: {"solution_code": BAD + f"  # {len(t)}"}},
     "repeated_instruction", "repeated_instructions", 1),
    ({"assistant": lambda t: {"solution_code": BAD}}, "no_progress", "no_progress_turns", 2),
])
def test_each_failure_mode_stops_the_conversation_with_its_reason(scripts, reason, counter, turns):
    prediction, history, _ = _solve({**SCRIPTS, **scripts}, max_turns=5)
    assert prediction.outcome.stop_reason == reason and getattr(prediction.outcome, counter) == 1
    assert prediction.outcome.turns == turns
    assert history[-1].intent == Intent.STATUS and history[-1].metadata["stop_reason"] == reason
