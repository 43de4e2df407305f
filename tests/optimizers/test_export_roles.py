"""One name per role across export, ``run --prompts`` and the optimisers: debate's ``coder`` role is
served by a predictor called ``proposer``, and everything finds it by the role's name."""

import json
from types import SimpleNamespace

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder
from support.specs import fake_spec

from critiquelab.core.errors import UserError
from critiquelab.experiments.cli.main import main
from critiquelab.optimizers.compile import (
    CompileConfig,
    attach_trace_demos,
    changed_roles,
    compile_program,
    keep_roles,
)
from critiquelab.optimizers.export import export_program, load_program, load_prompts_into, register_prompts
from critiquelab.optimizers.export_roles import migrate_state
from critiquelab.optimizers.gepa import RoleComponentSelector
from critiquelab.optimizers.refine import instruction_of, program_roles, role_predictors
from critiquelab.optimizers.training_examples import TaskOutcome, label_thread
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.pipelines.registry import program_roles as declared_roles
from critiquelab.runtime.pool.messages import Message

TUNED = "TUNED: write the function, nothing else."


def _export_tuned_critic_loop(path):
    program = create_pipeline("critic_loop")
    program.coder.signature = program.coder.signature.with_instructions(TUNED)
    export_program(program, path, pipeline="critic_loop", formats=["json"], source="test")


def test_run_prompts_of_a_critic_loop_export_reaches_debates_coder(tmp_path, home, humaneval_problems,
                                                                   capsys):
    """Was: "its prompts (coder, critic, fixer) match no role of this pipeline", exit 2."""
    _export_tuned_critic_loop(tmp_path / "prog")
    pipelines = [{"name": "critic_loop", "params": {"max_iterations": 1}},
                 {"name": "debate", "params": {"debaters": 2, "rounds": 0}}]
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=1, pipelines=pipelines,
                                                 pool={"persist": False})))
        code = main(["run", str(spec), "--no-progress", "--no-compare", "--prompts", str(tmp_path / "prog")])
        assert code == 0, capsys.readouterr().err
        requests = [json.dumps(r["messages"]) for r in fake.requests if "messages" in r]
    judge = [r for r in requests if "`choice`" in r]
    coder = [r for r in requests if "Your answer is `code`" in r]
    assert judge, "debate ran"
    assert len(coder) == 3 and all(TUNED in r for r in coder)  # critic loop's coder, 2 proposers


def test_prompts_matching_no_role_name_the_pipeline(tmp_path):
    _export_tuned_critic_loop(tmp_path / "prog")
    with pytest.raises(UserError) as error:
        load_prompts_into(create_pipeline("role_play"), tmp_path / "prog")
    roles = "(roles: task_specifier, instructor, assistant)"
    assert f"match no role of pipeline 'role_play' {roles}" in str(error.value)


def test_an_export_is_keyed_by_role(tmp_path):
    debate = create_pipeline("debate")
    debate.proposer.signature = debate.proposer.signature.with_instructions(TUNED)
    export_program(debate, tmp_path, pipeline="debate", formats=["json", "md"])
    state = json.loads((tmp_path / "program.json").read_text())
    assert set(state) == {"coder", "debater", "judge", "metadata"}
    assert state["coder"]["signature"]["instructions"] == TUNED
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["roles"] == {"coder": ["proposer"], "debater": ["debater"], "judge": ["judge"]}
    assert set(json.loads((tmp_path / "messages.json").read_text())) == {"coder", "debater", "judge"}
    assert "## coder" in (tmp_path / "prompts.md").read_text()
    program, _ = load_program(tmp_path)
    assert program.proposer.signature.instructions == TUNED


def _old_debate_export(path, *, manifest=True):
    """An export as written before roles were declared: keyed by predictor name."""
    debate = create_pipeline("debate")
    debate.proposer.signature = debate.proposer.signature.with_instructions(TUNED)
    path.mkdir()
    debate.save(str(path / "program.json"))
    if manifest:
        (path / "manifest.json").write_text(json.dumps(
            {"pipeline": "debate", "params": {}, "source": "old", "roles": ["proposer", "debater", "judge"]}))


def test_an_export_keyed_by_predictor_name_still_loads(tmp_path):
    _old_debate_export(tmp_path / "old")
    program, manifest = load_program(tmp_path / "old")
    assert manifest["pipeline"] == "debate" and program.proposer.signature.instructions == TUNED
    critic_loop = create_pipeline("critic_loop")  # proposer is debate's coder: it migrates
    assert load_prompts_into(critic_loop, tmp_path / "old") == ["coder"]
    assert critic_loop.coder.signature.instructions == TUNED
    _old_debate_export(tmp_path / "bare", manifest=False)  # no manifest: the same pipeline still loads
    debate = create_pipeline("debate")
    assert load_prompts_into(debate, tmp_path / "bare" / "program.json") == ["proposer", "debater", "judge"]
    assert debate.proposer.signature.instructions == TUNED


def test_the_migration_maps_predictor_names_through_the_exporting_pipeline():
    state = {"proposer": {"a": 1}, "judge": {"b": 2}, "metadata": {}}
    assert migrate_state(state, "debate") == {"coder": {"a": 1}, "judge": {"b": 2}}
    assert migrate_state(state, None) == {"proposer": {"a": 1}, "judge": {"b": 2}}
    assert migrate_state({"feedback": 1}, "self_refine") == {"self_feedback": 1}
    assert migrate_state({"coder": 1}, "no_such_pipeline") == {"coder": 1}


def test_registry_prompts_are_named_by_role_and_load_into_another_pipeline(tmp_path):
    debate = create_pipeline("debate")
    debate.proposer.signature = debate.proposer.signature.with_instructions(TUNED)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    versions = register_prompts(debate, uri, prefix="p")
    assert sorted(versions) == ["p.coder", "p.debater", "p.judge"]
    critic_loop = create_pipeline("critic_loop")
    assert load_prompts_into(critic_loop, "prompts:/p.coder/1", registry_uri=uri) == ["coder"]
    assert critic_loop.coder.signature.instructions == TUNED


def _coder_trace(code):
    return Message(task_id="T", thread_id="t", intent="output.complete", sender="debater0@t", content=code,
                   run_id="r", metadata={"trace": {"role": "coder", "inputs": {"prompt": "def f():"},
                                                   "outputs": {"code": code}, "parsed": True}})


def test_the_traces_optimiser_gives_debates_proposer_the_coder_traces(humaneval_problems):
    """Was: the proposer looked for traces of role `proposer` (pool traces carry `coder`): no demos."""
    traces = label_thread([_coder_trace("good")], TaskOutcome(passed=True))
    compiled = attach_trace_demos(create_pipeline("debate"), traces, k=3)
    assert [dict(d) for d in compiled.proposer.demos] == [{"prompt": "def f():", "code": "good"}]
    through_compile = compile_program(create_pipeline("debate"), CompileConfig("traces", {"k": 3}),
                                      train=humaneval_problems[:1], traces=traces)
    assert changed_roles(create_pipeline("debate"), through_compile) in ([], ["coder"])


def test_a_panel_critics_traces_are_the_critic_roles():
    inputs = {"prompt": "p", "code": "c", "execution_feedback": "none"}
    trace = {"role": "critic_correctness", "inputs": inputs,
             "outputs": {"verdict": "approve", "findings": [], "summary": "ok"}, "parsed": True}
    message = Message(task_id="T", thread_id="t", intent="panel_review", sender="critic_correctness@t",
                      content="", run_id="r", metadata={"trace": trace})
    traces = label_thread([message], TaskOutcome(passed=True))
    compiled = attach_trace_demos(create_pipeline("critic_loop"), traces, k=3)
    assert len(compiled.critic.demos) == 1


def test_role_limits_and_refinement_name_roles_not_attributes():
    debate, changed = create_pipeline("debate"), create_pipeline("debate")
    changed.proposer.signature = changed.proposer.signature.with_instructions(TUNED)
    changed.judge.signature = changed.judge.signature.with_instructions(TUNED)
    assert changed_roles(debate, changed) == ["coder", "judge"]
    kept = keep_roles(debate, changed.deepcopy(), ["coder"])
    assert kept.proposer.signature.instructions == TUNED and kept.judge.signature.instructions != TUNED
    assert role_predictors(changed, "coder") == [changed.proposer]
    assert program_roles(debate) == ["coder", "debater", "judge"]
    assert instruction_of(changed, "coder") == TUNED
    with pytest.raises(UserError, match="pipeline 'debate' has no 'proposer' role to refine"):
        instruction_of(debate, "proposer")


def test_gepas_selector_picks_the_predictor_of_the_chosen_role():
    debate = create_pipeline("debate")
    names = [name for name, _ in debate.named_predictors()]
    state = SimpleNamespace(list_of_named_predictors=names,
                            named_predictor_id_to_update_next_for_program_candidate=[0])
    selector = RoleComponentSelector(["coder"], declared_roles(debate).role_of)
    assert selector(state, [], [], 0, {}) == ["proposer"]  # type: ignore[arg-type]


def test_a_prompt_from_another_configuration_of_a_role_is_refused_not_garbled(tmp_path):
    """DSPy pairs a saved prompt's fields with the signature's by position: an ungrounded debate's
    debater (no own_results field) loaded into a grounded one would shift every description."""
    export_program(create_pipeline("debate"), tmp_path / "plain", pipeline="debate", formats=["json"],
                   source="test")
    grounded = create_pipeline("debate", execution_feedback=True)
    with pytest.raises(UserError) as error:
        load_prompts_into(grounded, tmp_path / "plain")
    assert "role 'debater' cannot be loaded into pipeline 'debate'" in str(error.value)
    assert "Own Results" in str(error.value)
    load_prompts_into(create_pipeline("debate"), tmp_path / "plain")  # the same configuration loads
