"""``plan_first`` on a scripted LM: from the Python API (the pipeline called in a notebook's
way) and from an experiment spec (what ``critiquelab run`` does), scored on HumanEval's tests."""

import dspy
from support.fake_openai import FakeOpenAIServer, chat_reply

from critiquelab.core.usage import UsageMeter, metering
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import create_pipeline, pipeline_names
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.signatures.adapter import CodeAdapter

PROMPT = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
STEPS = ["Read a and b.", "Add them.", "Return the sum.", "Say nothing else."]


def scripted(solution):
    """The planner (asked for `steps`) answers four steps; the coder answers ``solution(request)``."""

    def respond(messages):
        system, text = str(messages[0]["content"]), "\n".join(str(m["content"]) for m in messages)
        if "Reply with OK." in text:  # the runner's start-up check that the endpoint answers
            return "OK"
        if "`steps`" in system:
            return chat_reply(steps=str(STEPS).replace("'", '"'))
        return f"```python\n{solution(text)}\n```"

    return respond


def test_from_the_api_the_coder_follows_a_plan_cut_to_max_steps():
    assert "plan_first" in pipeline_names()  # found through the entry point
    pool = MessagePool()
    with FakeOpenAIServer(scripted(lambda _: "def add(a, b):\n    return a + b")) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base, api_key="x",
                       temperature=0.0, max_tokens=200, num_retries=0, seed=7)
        pipeline = create_pipeline("plan_first", max_steps=2)
        with dspy.context(lm=lm, adapter=CodeAdapter()), using_pool(pool), metering(UsageMeter()):
            prediction = pipeline(prompt=PROMPT, entry_point="add", task_id="t/1")
    assert prediction.code.strip() == "def add(a, b):\n    return a + b"
    assert prediction.outcome.plan_steps == 2
    coder_request = "\n".join(m["content"] for m in fake.requests[-1]["messages"])
    assert "1. Read a and b.\n2. Add them." in coder_request and "Return the sum" not in coder_request
    intents = [m.intent for m in pool.history(thread_id=prediction.outcome.thread_id)]
    assert intents == ["task_assignment", "plan", "output.complete"]


def test_from_a_spec_its_figures_and_roles_reach_the_run(tmp_path):
    from critiquelab.eval.datasets import load_problems
    from critiquelab.experiments.api import run

    solutions = {p.prompt: p.canonical_solution for p in load_problems()[:2]}

    def solution(text):  # the problem's reference solution, as a coder that gets it right
        prompt = next(p for p in solutions if p.strip() in text)
        return prompt + solutions[prompt]

    spec = {"name": "plugin", "dataset": {"source": "humaneval", "limit": 2}, "seeds": [0],
            "model": {"id": "openai/fake", "num_retries": 0},
            "pipelines": [{"name": "plan_first", "params": {"max_steps": 3},
                           "roles": {"planner": {"temperature": 0.0}}}]}
    with FakeOpenAIServer(scripted(solution)) as fake:
        spec["model"]["api_base"] = fake.api_base
        result = run(spec, home=tmp_path / "home", progress=False)
    (child,) = result.children
    assert child.pipeline == "plan_first"
    assert [r.status for r in child.results] == ["passed", "passed"]
    assert [r.extra["plan_steps"] for r in child.results] == [3, 3]
    assert child.metrics["role.planner.calls"] == 2 and child.metrics["role.coder.calls"] == 2
