"""Per-role model and sampling: roles on their own endpoint and temperature, token use per
model, and bad role settings refused in one line before anything is written."""

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, review, role_of, role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main


def _scripts(problems):
    scripted = ScriptedProblems(problems)

    def critic(text):
        code = text.rsplit("[[ ## code ## ]]", 1)[-1]
        return review("request_changes", "a placeholder") if "first draft" in code else review("approve")

    return {
        "coder": lambda text: {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"},
        "critic": critic,
        "fixer": lambda text: {"revised_code": scripted.solution(text)},
    }


def _role_calls(requests):
    """Role requests (not the endpoint check the run starts with)."""
    return [r for r in requests if "Reply with OK." not in str(r["messages"])]


def test_roles_run_on_their_own_endpoint_and_temperature_and_tokens_are_reported_per_model(
    home, humaneval_problems
):
    scripts = _scripts(humaneval_problems)
    with FakeOpenAIServer(role_responder(scripts)) as main_lm, \
            FakeOpenAIServer(role_responder(scripts)) as critic_lm:
        roles = {"critic": {"model": "openai/critic-model", "api_base": critic_lm.api_base},
                 "fixer": {"temperature": 0.8}}
        pipelines = [{"name": "critic_loop", "params": {"max_iterations": 2}, "roles": roles}]
        result = run(fake_spec(main_lm.api_base, pipelines=pipelines, limit=3), progress=False)
        main_requests, critic_requests = list(main_lm.requests), list(critic_lm.requests)

    child = result.children[0]
    assert child.metrics["pass_at_1"] == 1.0
    critic_calls, main_calls = _role_calls(critic_requests), _role_calls(main_requests)
    assert {role_of(r["messages"]) for r in critic_calls} == {"critic"}
    assert {role_of(r["messages"]) for r in main_calls} == {"coder", "fixer"}
    assert {r["model"] for r in critic_requests} == {"critic-model"}
    # The critic gets the run's seed, as the experiment's model does; the fixer samples.
    assert {r.get("seed") for r in critic_calls} == {0}
    temperatures = {role_of(r["messages"]): r["temperature"] for r in main_calls}
    assert temperatures == {"coder": 0.0, "fixer": 0.8}

    critic_tokens = child.metrics["role.critic.tokens"]
    assert child.metrics["model.openai/critic-model.tokens"] == critic_tokens > 0
    assert child.metrics["model.openai/fake.tokens"] == (
        child.metrics["role.coder.tokens"] + child.metrics["role.fixer.tokens"]
    )
    assert child.metrics["model.openai/critic-model.calls"] == child.metrics["role.critic.calls"] == 6


def test_a_role_temperature_alone_reports_no_per_model_split(home, humaneval_problems):
    with FakeOpenAIServer(role_responder(_scripts(humaneval_problems))) as fake:
        pipelines = [{"name": "critic_loop", "roles": {"fixer": {"temperature": 0.5}}}]
        child = run(fake_spec(fake.api_base, pipelines=pipelines, limit=1), progress=False).children[0]
    assert not [k for k in child.metrics if k.startswith("model.")]


@pytest.mark.parametrize(("roles", "expected"), [
    ({"fixr": {"temperature": 0.8}},
     "pipelines.0: pipeline 'critic_loop': roles.fixr: unknown role; roles: coder, critic, fixer, "
     "meta_critic"),
    ({"critic": {"model": "gpt4"}},
     "pipelines.0.roles.critic.model: 'gpt4' is not a model: use 'local', 'local-1.5b' or a LiteLLM "
     "string such as 'openai/gpt-4o-mini' (provider/model)"),
    ({"critic": {"temperature": 3}}, "pipelines.0.roles.critic.temperature:"),
    ({"critic": {"api_base": "http://127.0.0.1:1/v1"}},
     "pipelines.0.roles.critic: api_base needs a model (the LiteLLM model string it serves)"),
])
def test_bad_role_settings_are_one_line_exit_2_and_nothing_is_written(tmp_path, capsys, home, roles,
                                                                      expected):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "x", "pipelines": [{"name": "critic_loop", "roles": roles}]}))
    code = main(["--home", str(home), "run", str(spec)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{spec}: {expected}" in err
    assert not home.exists()


def test_an_unreachable_role_endpoint_stops_the_run_before_anything_is_written(tmp_path, capsys, home,
                                                                               humaneval_problems):
    with FakeOpenAIServer(role_responder(_scripts(humaneval_problems))) as fake:
        roles = {"critic": {"model": "openai/critic-model", "api_base": "http://127.0.0.1:9/v1"}}
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec(
            fake.api_base, pipelines=[{"name": "critic_loop", "roles": roles}], limit=1,
        )))
        code = main(["--home", str(home), "run", str(spec)])
    err = capsys.readouterr().err
    assert code == 2 and "model endpoint http://127.0.0.1:9/v1 is not usable" in err
    assert not (home / "mlflow.db").exists()
