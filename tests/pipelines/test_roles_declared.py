"""Roles declared once: every registered pipeline's predictors and every name its calls are made
as (``call_role``, hence the pool's traces and per-role models) map to a role its registration
declares, so the pool, per-role models, the optimisers and export all speak of the same roles."""

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder

from critiquelab.core.errors import UserError
from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.registry import (
    create_pipeline,
    pipeline_names,
    pipeline_roles,
    program_roles,
    role_map,
)
from critiquelab.pipelines.roles import Role, declare_roles, predictor_path
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool

# Params that switch on what the defaults leave out (optional predictors, a panel's call names).
VARIANTS: dict[str, list[dict[str, object]]] = {
    "critic_loop": [{"meta_critic": True}, {"critics": ["correctness", "edge_cases"]}],
    "sop": [{"reviewer": True}],
    "vote": [{"tests": "generated"}],
}


def _configurations() -> list[tuple[str, dict[str, object]]]:
    return [(name, params) for name in pipeline_names() for params in [{}, *VARIANTS.get(name, [])]]


CONFIGURATIONS = _configurations()
IDS = [f"{name}-{'-'.join(map(str, params)) or 'defaults'}" for name, params in CONFIGURATIONS]


@pytest.mark.parametrize(("name", "params"), CONFIGURATIONS, ids=IDS)
def test_every_predictor_serves_a_declared_role(name, params):
    program = create_pipeline(name, **params)
    roles = program_roles(program)
    assert roles.pipeline == name and roles.names == pipeline_roles(name)
    for predictor, _ in program.named_predictors():
        assert roles.find_role(predictor) is not None, f"{name}: predictor {predictor} serves no role"


def test_the_variants_switch_on_what_defaults_leave_out():
    """Else the per-predictor check above would pass without ever seeing those predictors."""
    assert "meta_critic" in dict(create_pipeline("critic_loop", meta_critic=True).named_predictors())
    assert "reviewer" in dict(create_pipeline("sop", reviewer=True).named_predictors())
    assert "test_writer" in dict(create_pipeline("vote", tests="generated").named_predictors())


@pytest.fixture(scope="module")
def call_names(humaneval_problems):
    """Each configuration run on one problem (scripted LM): the names its role calls carried."""
    problem = humaneval_problems[0]
    found: dict[str, set[str]] = {}
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base, api_key="x",
                       temperature=0.0, max_tokens=400, num_retries=0, seed=0)
        for (name, params), label in zip(CONFIGURATIONS, IDS, strict=True):
            with MessagePool() as pool, using_pool(pool), dspy.context(lm=lm):
                create_pipeline(name, **params)(
                    prompt=problem.prompt, entry_point=problem.entry_point, task_id=problem.task_id)
                found[label] = {str(m.metadata["trace"]["role"]) for m in pool.history()
                                if m.metadata.get("trace")}
        lm.close()
    return found


@pytest.mark.parametrize(("name", "params"), CONFIGURATIONS, ids=IDS)
def test_every_role_call_maps_to_a_declared_role(name, params, call_names):
    label = IDS[CONFIGURATIONS.index((name, params))]
    calls = call_names[label]
    assert calls, f"{label}: no role call reached the pool"
    roles = role_map(name)
    unmapped = sorted(c for c in calls if roles.role_of_call(c) is None)
    assert unmapped == [], f"{label}: calls made as {unmapped} map to no declared role {roles.names}"


def test_debate_declares_its_proposer_as_the_coder_role():
    debate = create_pipeline("debate")
    roles = program_roles(debate)
    assert roles.role_of("proposer") == "coder"
    assert [n for n, _ in roles.predictors(debate, "coder")] == ["proposer"]
    assert program_roles(create_pipeline("self_refine")).role_of("feedback") == "self_feedback"
    assert program_roles(create_pipeline("architect")).role_of("reviewer") == "team_reviewer"


def test_a_panel_critic_call_is_the_critic_role():
    assert role_map("critic_loop").role_of_call("critic_edge_cases") == "critic"
    assert role_map("critic_loop").role_of_call("critic_nonsense") is None


def test_a_predictor_no_role_declares_is_an_error_naming_the_pipeline():
    roles = declare_roles("mine", {"coder": "writer"})
    with pytest.raises(UserError, match="pipeline 'mine': predictor 'other' serves no declared role"):
        roles.role_of("other")


def test_a_declaration_may_not_give_one_predictor_two_roles():
    with pytest.raises(ValueError, match="pipeline 'mine'"):
        declare_roles("mine", {"coder": "writer", "fixer": "writer"})
    with pytest.raises(ValueError, match="pipeline 'mine'"):  # a predictor named like another role
        declare_roles("mine", {"coder": "fixer", "fixer": "repair"})
    with pytest.raises(TypeError):
        declare_roles("mine", "coder")  # type: ignore[arg-type]


def test_declarations_read_predictor_paths_as_named_predictors_gives_them():
    assert predictor_path("critics[1]") == predictor_path("critics.1") == "critics"
    assert predictor_path("team.coder.predict") == "team.coder"
    roles = declare_roles("mine", {"critic": Role(("critics",), ("critic_a",)), "coder": ("team.coder",)})
    assert roles.role_of("critics[0]") == "critic" and roles.role_of("team.coder.predict") == "coder"
    plain = declare_roles("mine", ("coder", "critic"))
    assert plain.predictor_names() == {"coder": ["coder"], "critic": ["critic"]}


def test_listing_shows_the_predictors_of_each_role():
    from critiquelab.pipelines.registry import describe_pipelines

    debate = next(p for p in describe_pipelines() if p["name"] == "debate")
    assert debate["roles"] == ["coder", "debater", "judge"]
    assert debate["predictors"] == {"coder": ["proposer"], "debater": ["debater"], "judge": ["judge"]}
