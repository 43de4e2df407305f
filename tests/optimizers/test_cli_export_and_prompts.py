"""CLI wiring: `critiquelab export` and `critiquelab run --prompts`."""

import json

import yaml
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec

from experiments.cli import main
from optimizers.export import export_program
from pipelines.registry import create_pipeline

TUNED = "TUNED: write the function, nothing else."


def _export_tuned(path):
    program = create_pipeline("critic_loop")
    program.coder.signature = program.coder.signature.with_instructions(TUNED)
    export_program(program, path, pipeline="critic_loop", formats=["json"], source="test")


def test_export_command_writes_readable_prompts_and_registers_them(tmp_path, home, capsys):
    _export_tuned(tmp_path / "prog")
    assert main(["export", str(tmp_path / "prog"), "--format", "md,txt,mlflow", "--out",
                 str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "MLflow prompt critiquelab.critic_loop.coder version 1" in printed
    assert TUNED in (tmp_path / "out" / "prompts.md").read_text()
    assert (tmp_path / "out" / "program.json").is_file()


def test_export_of_unknown_target_is_one_line_exit_2(tmp_path, home, capsys):
    assert main(["export", "no-such-run-or-path"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("critiquelab: error:") and len(err.strip().splitlines()) == 1


def test_run_with_prompts_sends_the_exported_instruction(tmp_path, home, humaneval_problems):
    _export_tuned(tmp_path / "prog")
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=2, pool={"persist": False})))
        assert main(["run", str(spec), "--no-progress", "--prompts", str(tmp_path / "prog")]) == 0
        with_prompts = [json.dumps(r["messages"]) for r in fake.requests if "messages" in r]
        assert main(["run", str(spec), "--no-progress"]) == 0  # without: a different configuration
        plain = [json.dumps(r["messages"]) for r in fake.requests if "messages" in r][len(with_prompts):]
    coder_requests = [r for r in with_prompts if "Your answer is" in r]
    assert len(coder_requests) == 2 and all(TUNED in r for r in coder_requests)
    assert plain and not any(TUNED in r for r in plain)


def test_prompts_per_pipeline_pair_a_pipeline_with_and_without_them(tmp_path, home, humaneval_problems):
    _export_tuned(tmp_path / "prog")
    pipelines = [
        {"name": "baseline", "label": "plain"},
        {"name": "baseline", "label": "tuned", "prompts": str(tmp_path / "prog")},
    ]
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=2, pipelines=pipelines,
                                                 pool={"persist": False})))
        assert main(["run", str(spec), "--no-progress", "--no-compare"]) == 0
        requests = [json.dumps(r["messages"]) for r in fake.requests if "messages" in r]
    requests = [r for r in requests if "Reply with OK." not in r]  # the endpoint pre-flight
    # The runner finishes one pipeline before the next: plain's two requests, then tuned's.
    assert len(requests) == 2 * 2
    assert not any(TUNED in r for r in requests[:2]) and all(TUNED in r for r in requests[2:])
