"""CLI wiring: `critiquelab export` and `critiquelab run --prompts`."""

import json

import yaml
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.specs import fake_spec

from critiquelab.experiments.cli.main import main
from critiquelab.optimizers.export import export_program
from critiquelab.pipelines.registry import create_pipeline

TUNED = "TUNED: write the function, nothing else."


def _export_tuned(path, formats=("json",)):
    program = create_pipeline("critic_loop")
    program.coder.signature = program.coder.signature.with_instructions(TUNED)
    export_program(program, path, pipeline="critic_loop", formats=formats, source="test")


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


def test_prompts_load_back_from_the_registry_by_uri(tmp_path, home, humaneval_problems, capsys):
    _export_tuned(tmp_path / "prog")
    assert main(["export", str(tmp_path / "prog"), "--format", "mlflow"]) == 0
    capsys.readouterr()
    uri = "prompts:/critiquelab.critic_loop.coder/1"
    with FakeOpenAIServer(humaneval_responder(humaneval_problems)) as fake:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(fake_spec(fake.api_base, limit=2, pool={"persist": False})))
        assert main(["run", str(spec), "--no-progress", "--prompts", uri]) == 0
        requests = [json.dumps(r["messages"]) for r in fake.requests if "messages" in r]
    coder_requests = [r for r in requests if "Your answer is" in r]
    assert len(coder_requests) == 2 and all(TUNED in r for r in coder_requests)
    assert main(["run", str(spec), "--no-progress", "--prompts", "prompts:/no.such.prompt/1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "prompts:/no.such.prompt/1" in err and len(err.splitlines()) == 1


def test_registry_state_round_trips_every_role(tmp_path):
    from critiquelab.optimizers.export import load_prompts_into, prompts_state, register_prompts

    program = create_pipeline("critic_loop")
    program.coder.signature = program.coder.signature.with_instructions(TUNED)
    program.critic.demos = [{"code": "def f(): pass", "verdict": "approve"}]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    versions = register_prompts(program, uri, prefix="p")
    uris = ",".join(f"prompts:/{name}/{version}" for name, version in versions.items())
    state = prompts_state(uris, registry_uri=uri)
    assert state == {name: json.loads(json.dumps(p.dump_state())) for name, p in program.named_predictors()}
    fresh = create_pipeline("critic_loop")
    assert sorted(load_prompts_into(fresh, uris, registry_uri=uri)) == ["coder", "critic", "fixer"]
    assert fresh.coder.signature.instructions == TUNED and fresh.critic.demos == program.critic.demos


def _bad_targets(root):
    """Each: (CLI arguments after `export`, what the one line must say)."""
    _export_tuned(root / "prog", formats=("json", "md"))
    program = (root / "prog" / "program.json").read_text()
    (root / "random.json").write_text(json.dumps({"answer": 42}))
    (root / "list.json").write_text("[1, 2]")
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (root / "empty_dir").mkdir()
    (root / "no_manifest").mkdir()
    (root / "no_manifest" / "program.json").write_text(program)
    for name, manifest in {"keyless": {"params": {}}, "unknown_pipeline": {"pipeline": "nope"}}.items():
        (root / name).mkdir()
        (root / name / "program.json").write_text(program)
        (root / name / "manifest.json").write_text(json.dumps(manifest))
    state = json.loads(program)
    state["coder"]["lm"] = {"model": "openai/gpt-4o"}
    (root / "own_lm").mkdir()
    (root / "own_lm" / "program.json").write_text(json.dumps(state))
    (root / "a_file").write_text("")
    prompts_md = root / "prog" / "prompts.md"
    return {
        "readable prompts": (
            [str(prompts_md)],
            f"{prompts_md}: not an exported program (not JSON); expected a `critiquelab export` "
            f"directory or its program.json ({root / 'prog'} is one)",
        ),
        "some other JSON": (
            [str(root / "random.json")], "random.json: not an exported program ('answer' is not a predictor",
        ),
        "a JSON list": ([str(root / "list.json")], "list.json: not an exported program (not a JSON object)"),
        "JSON nested too deeply": (
            [str(root / "deep.json")], "deep.json: not an exported program (JSON nested too deeply)",
        ),
        "directory without a program": (
            [str(root / "empty_dir")], "empty_dir: no exported program (program.json) there",
        ),
        "program without manifest": (
            [str(root / "no_manifest")], "no_manifest: no manifest.json; cannot tell which pipeline it is",
        ),
        "manifest lacking its pipeline": (
            [str(root / "keyless")],
            "keyless/manifest.json: not a `critiquelab export` manifest; expected a JSON object with "
            "'pipeline' (a name) and 'params' (an object)",
        ),
        "manifest naming no pipeline": (
            [str(root / "unknown_pipeline")], "unknown_pipeline/manifest.json: unknown pipeline 'nope'",
        ),
        "state with its own LM": ([str(root / "own_lm")], "'coder' carries its own LM setting"),
        "unknown format, checked before the run id": (
            ["no-such-run", "--format", "json,bogus"],
            "unknown export format(s) bogus; choose from json, md, txt, mlflow",
        ),
        "no format": ([str(root / "prog"), "--format", ","], "--format: expected a comma-separated list"),
        "output that is a file": (
            [str(root / "prog"), "--out", str(root / "a_file")], "a_file' exists and is not a directory",
        ),
    }


def test_bad_export_targets_and_options_are_one_line_exit_2_writing_nothing(tmp_path, home, capsys):
    cases = _bad_targets(tmp_path / "targets")
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "targets").rglob("*")}
    for name, (arguments, expected) in cases.items():
        out = [] if "--out" in arguments else ["--out", str(tmp_path / "out")]
        assert main(["export", *arguments, *out]) == 2, name
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("critiquelab: error: "), (name, captured.err)
        assert expected in err[0], (name, err[0])
        assert not captured.out, name
    assert not home.exists() and not (tmp_path / "out").exists()
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "targets").rglob("*")} == before


def test_run_with_prompts_that_are_no_program_is_one_line_exit_2(tmp_path, home, capsys):
    _export_tuned(tmp_path / "prog", formats=("json", "md"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(fake_spec("http://127.0.0.1:9/v1", limit=2)))  # never contacted
    for prompts in (tmp_path / "prog" / "prompts.md", tmp_path / "prog" / "manifest.json",
                    tmp_path / "prog" / "messages.json"):
        assert main(["run", str(spec), "--no-progress", "--prompts", str(prompts)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"critiquelab: error: {prompts}: not an exported program")
    assert not home.exists()  # no run, store, checkpoint or dataset cache


def test_export_of_a_run_without_a_program_is_one_line_and_no_download(tmp_path, home, capsys):
    from critiquelab.experiments.tracking.store import Tracker

    tracker = Tracker(home, "no-program")
    run_id = tracker.start_run("baseline")
    tracker.log_text(run_id, "{}", "problems.json")
    tracker.finish(run_id)
    assert main(["export", run_id, "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"critiquelab: error: run {run_id} has no 'program' artifact and is no experiment run with finished "
        "pipelines (nothing to export)"]
    assert not captured.out and not (tmp_path / "out").exists()  # no progress bar, nothing written


def test_a_registry_prompt_on_a_fresh_data_directory_is_one_line_and_no_store(tmp_path, home, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(fake_spec("http://127.0.0.1:9/v1", limit=2)))  # never contacted
    assert main(["run", str(spec), "--no-progress", "--prompts", "prompts:/nosuch/1"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("critiquelab: error: prompts:/nosuch/1: no such prompt: there is no MLflow store")
    assert not home.exists()  # opening the registry would have made an empty mlflow.db
