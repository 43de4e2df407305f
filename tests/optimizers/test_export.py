"""Export and import: readable prompts, and a round trip with byte-identical LM requests."""

import json

from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.optimizers.compile import CompileConfig, compile_program
from critiquelab.optimizers.export import (
    export_program,
    load_program,
    load_prompts_into,
    register_prompts,
    to_text,
)
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.signatures.adapter import CodeAdapter


def _requests(program, problem):
    import dspy

    with FakeOpenAIServer(role_responder(critic_loop_scripts([problem]))) as fake:
        lm = dspy.LM("openai/fake", api_base=fake.api_base, api_key="fake", cache=False, num_retries=0)
        with dspy.context(lm=lm, adapter=CodeAdapter()):
            program(prompt=problem.prompt, entry_point=problem.entry_point, task_id=problem.task_id)
        return [json.dumps(r["messages"], sort_keys=True) for r in fake.requests]


def test_round_trip_sends_byte_identical_requests(tmp_path, humaneval_problems, make_lm):
    params = {"max_iterations": 2}
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        compiled = compile_program(
            create_pipeline("critic_loop", **params),
            CompileConfig("bootstrap", {"max_bootstrapped_demos": 2}),
            train=humaneval_problems[:2], task_lm=make_lm(fake.api_base),
        )
    assert compiled.critic.demos  # there is something to round-trip
    target = humaneval_problems[5]
    before = _requests(compiled, target)
    written = export_program(
        compiled, tmp_path / "out", pipeline="critic_loop", params=params, source="run-1"
    )
    assert {p.name for p in written} == {"program.json", "manifest.json", "messages.json", "prompts.md",
                                         "prompts.txt"}
    loaded, manifest = load_program(tmp_path / "out")
    assert manifest["pipeline"] == "critic_loop" and manifest["params"] == params
    after = _requests(loaded, target)
    assert len(before) == len(after) >= 3
    assert before == after
    fresh = _requests(create_pipeline("critic_loop", **params), target)
    assert fresh != before  # the demos are really in the requests, so the comparison means something


def test_markdown_and_text_show_the_adapter_messages_with_placeholders(tmp_path):
    program = create_pipeline("critic_loop")
    program.coder.signature = program.coder.signature.with_instructions("Write great code, OPTIMISED.")
    export_program(program, tmp_path, pipeline="critic_loop", formats=["md", "txt"])
    md, txt = (tmp_path / "prompts.md").read_text(), (tmp_path / "prompts.txt").read_text()
    assert "## coder" in md and "## critic" in md and "## fixer" in md
    assert "Write great code, OPTIMISED." in md and "Write great code, OPTIMISED." in txt
    assert "```python\n{prompt}\n```" in txt  # CodeAdapter's rendering of the coder's input
    assert "{execution_feedback}" in txt  # the critic's (ChatAdapter-style) inputs


def test_messages_json_holds_the_text_files_messages_as_data(tmp_path):
    program = create_pipeline("baseline")
    program.coder.demos = [{"prompt": "def f():\n", "code": "def f():\n    return 1\n\n"}]
    export_program(program, tmp_path, pipeline="baseline", formats=["json", "txt"])
    messages = json.loads((tmp_path / "messages.json").read_text())
    assert list(messages) == ["coder"] and [m["role"] for m in messages["coder"]] == [
        "system", "user", "assistant", "user"]  # instruction, the demo's question and answer, the task
    assert "```python\n{prompt}\n```" in messages["coder"][-1]["content"]
    assert to_text(messages) == (tmp_path / "prompts.txt").read_text()  # the same messages a reader sees


def test_prompts_load_into_another_pipeline_role_by_role(tmp_path):
    import pytest

    from critiquelab.core.errors import UserError

    program = create_pipeline("critic_loop")
    program.coder.signature = program.coder.signature.with_instructions("Coder, tuned.")
    export_program(program, tmp_path, pipeline="critic_loop", formats=["json"])
    baseline = create_pipeline("baseline")
    assert load_prompts_into(baseline, tmp_path) == ["coder"]
    assert baseline.coder.signature.instructions == "Coder, tuned."
    debate = create_pipeline("debate")  # its coder role is served by the predictor `proposer`
    assert load_prompts_into(debate, tmp_path) == ["proposer"]
    assert debate.proposer.signature.instructions == "Coder, tuned."
    with pytest.raises(UserError, match="match no role of pipeline 'role_play'"):
        load_prompts_into(create_pipeline("role_play"), tmp_path)


def test_mlflow_registry_gets_a_new_version_per_export(tmp_path):
    program = create_pipeline("baseline")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = register_prompts(program, uri, prefix="critiquelab.baseline", run_id="abc")
    second = register_prompts(program, uri, prefix="critiquelab.baseline", run_id="def")
    assert first == {"critiquelab.baseline.coder": 1} and second == {"critiquelab.baseline.coder": 2}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    prompt = client.load_prompt("critiquelab.baseline.coder", version=2)
    assert prompt.tags.get("critiquelab.run_id") == "def"
    assert "{{prompt}}" in json.dumps(prompt.template)
