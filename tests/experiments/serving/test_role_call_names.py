"""A role's own model or temperature reaches every call its pipeline declares as that role: a
critic panel's critics (``critic_correctness`` …) are the critic role."""

from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run


def test_a_critic_temperature_reaches_the_panel_critics(home, humaneval_problems):
    params = {"max_iterations": 1, "critics": ["correctness", "edge_cases"]}
    pipelines = [{"name": "critic_loop", "params": params, "roles": {"critic": {"temperature": 0.3}}}]
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        run(fake_spec(fake.api_base, limit=1, pipelines=pipelines), progress=False)
        panel = [r for r in fake.requests if "messages" in r and "`verdict`" in str(r["messages"][0])]
        others = [r for r in fake.requests if "messages" in r and "`verdict`" not in str(r["messages"][0])]
    assert len(panel) == 2 and all(r.get("temperature") == 0.3 for r in panel)
    assert others and all(r.get("temperature") != 0.3 for r in others)
