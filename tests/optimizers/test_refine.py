"""TextGrad refinement of a role's instruction: scripted task LM and TextGrad engine (both fake
OpenAI-compatible servers); the validation gate keeps or rejects the new instruction."""

import json
from pathlib import Path

import pytest
from support.critic_scripts import HOPELESS, critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, role_responder

from critiquelab.optimizers.refine import instruction_of, refine_instruction
from critiquelab.optimizers.textgrad_engine import OpenAICompatibleEngine
from critiquelab.optimizers.training_examples import assert_no_hidden_tests
from critiquelab.pipelines.registry import create_pipeline

SLOPPY = "Answer as fast as possible, a stub body is fine."
CAREFUL = "Implement the function completely and handle every edge case the docstring implies."


def task_scripts(problems):
    """The critic loop of conftest, but the coder follows its instruction: under SLOPPY it
    writes a stub the (scripted) critic approves, so the final code fails. The fixer's attempt at
    HOPELESS raises an error quoting its hidden test, so the verdict detail (and the code) hold
    a hidden-test line the feedback must redact."""
    scripts = critic_loop_scripts(problems)
    scripted = ScriptedProblems(problems)

    def fixer(text):
        problem = scripted.problem_in(text)
        if problem.task_id == HOPELESS:
            return {"revised_code": problem.prompt + f"    raise ValueError({secret_of(problem)!r})\n"}
        return scripts["fixer"](text)

    def coder(text):
        problem = scripted.problem_in(text)
        if SLOPPY in text:
            return {"code": scripted.wrong(text)}
        if problem.task_id == HOPELESS:
            return {"code": problem.prompt + "    return 'first draft'\n"}
        return {"code": scripted.solution(text)}

    return {**scripts, "coder": coder, "fixer": fixer}


def secret_of(problem):
    return next(line.strip() for line in problem.test.splitlines() if "assert" in line)


def engine_responder(new_instruction):
    """TGD's update request gets the new instruction in its tags; evaluations and gradients get
    a critique."""

    def respond(messages):
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if "<IMPROVED_VARIABLE>" in text:
            return f"<IMPROVED_VARIABLE>{new_instruction}</IMPROVED_VARIABLE>"
        return "The instruction does not insist on handling the failing case; say so explicitly."

    return respond


def _split(problems):
    by_id = {p.task_id: p for p in problems}
    train = [by_id[HOPELESS], by_id["HumanEval/0"]]
    val = [by_id["HumanEval/1"], by_id["HumanEval/3"]]
    return train, val


def _refine(problems, make_lm, new_instruction, steps=1, **options):
    train, val = _split(problems)
    program = create_pipeline("critic_loop", max_iterations=2)
    before = instruction_of(program, "coder")
    with FakeOpenAIServer(role_responder(task_scripts(problems))) as task, \
            FakeOpenAIServer(engine_responder(new_instruction)) as tg_server:
        engine = OpenAICompatibleEngine("tg-model", base_url=tg_server.api_base, api_key="k",
                                        temperature=0.4, max_tokens=256)
        result = refine_instruction(program, "coder", train, val, task_lm=make_lm(task.api_base),
                                    engine=engine, steps=steps, **options)
    assert instruction_of(program, "coder") == before  # the input program is untouched
    return program, before, result, tg_server.requests


def test_refinement_that_lowers_validation_is_rejected(humaneval_problems, make_lm):
    program, before, result, _ = _refine(humaneval_problems, make_lm, SLOPPY)
    assert result.instruction_after == SLOPPY and result.history[0]["updated"]
    assert (result.val_before, result.val_after) == (1.0, 0.0)
    assert result.kept is False and result.reason == "validation pass@1 dropped: 0.000 < 1.000"
    assert instruction_of(result.program, "coder") == before
    assert result.program is not program


def test_refinement_that_keeps_validation_is_kept_and_leaves_other_roles(humaneval_problems, make_lm):
    program, before, result, requests = _refine(humaneval_problems, make_lm, CAREFUL, steps=2)
    assert result.kept is True and result.val_after >= result.val_before == 1.0
    assert instruction_of(result.program, "coder") == CAREFUL != before
    assert instruction_of(result.program, "critic") == instruction_of(program, "critic")
    assert [h["step"] for h in result.history] == [0, 1]  # HOPELESS still fails: both steps learn
    assert result.history[0]["losses"] == 1  # only the run with something to learn from
    # The engine got the configured settings, the run's critic review and the verdict — and
    # never a hidden-test line.
    assert {(r["model"], r["temperature"], r["max_tokens"]) for r in requests} == {("tg-model", 0.4, 256)}
    sent = [{"body": json.dumps(r["messages"])} for r in requests]
    assert any("request_changes" in s["body"] and "it raised an exception. (ValueError)" in s["body"]
               for s in sent)  # the verdict names the exception's type, never its message
    assert_no_hidden_tests(sent, humaneval_problems)


def test_each_step_learns_from_a_seeded_minibatch_of_the_train_split(humaneval_problems, make_lm):
    train_ids = {p.task_id for p in _split(humaneval_problems)[0]}
    runs = [_refine(humaneval_problems, make_lm, CAREFUL, steps=2, batch_size=1, seed=seed)[2].history
            for seed in (3, 3)]
    assert runs[0] == runs[1]  # same seed, same minibatches
    for record in runs[0]:
        assert len(record["problems"]) == 1 and set(record["problems"]) <= train_ids


@pytest.mark.parametrize("reply", ["Sure! Here is a better instruction: be careful.",
                                   "<IMPROVED_VARIABLE>  </IMPROVED_VARIABLE>"])
def test_unusable_optimiser_reply_leaves_the_instruction(humaneval_problems, make_lm, reply):
    train, val = _split(humaneval_problems)
    program = create_pipeline("critic_loop", max_iterations=2)
    with FakeOpenAIServer(role_responder(task_scripts(humaneval_problems))) as task, \
            FakeOpenAIServer(lambda messages: reply) as tg_server:
        engine = OpenAICompatibleEngine("tg-model", base_url=tg_server.api_base)
        result = refine_instruction(program, "coder", train, val, task_lm=make_lm(task.api_base),
                                    engine=engine, steps=1, val_before=0.5)
        assert task.completions == 6  # the train runs only: an unchanged instruction is not re-validated
    assert result.history[0]["error"] and not result.history[0]["updated"]
    assert result.kept is False and result.instruction_after == result.instruction_before
    assert (result.val_before, result.val_after) == (0.5, 0.5)
    assert result.reason == "TextGrad proposed no new instruction"


def test_a_missing_validation_score_keeps_the_instruction_before(humaneval_problems, make_lm):
    _, before, result, _ = _refine(humaneval_problems, make_lm, CAREFUL, val_before=float("nan"))
    assert result.instruction_after == CAREFUL and result.val_after == 1.0
    assert result.kept is False and instruction_of(result.program, "coder") == before
    assert result.reason.startswith("no validation score for the program before")


def test_refining_without_validation_problems_is_refused_before_any_lm_call(humaneval_problems, make_lm):
    from critiquelab.core.errors import UserError

    train, _ = _split(humaneval_problems)
    with FakeOpenAIServer(role_responder(task_scripts(humaneval_problems))) as task:
        with pytest.raises(UserError, match="no validation problems"):
            refine_instruction(create_pipeline("critic_loop"), "coder", train, [],
                               task_lm=make_lm(task.api_base), engine=None)
        assert task.completions == 0


def test_hidden_test_line_in_a_request_is_refused(humaneval_problems, make_lm):
    from critiquelab.optimizers.refine import guarded_engine

    problem = next(p for p in humaneval_problems if p.task_id == HOPELESS)
    secret = secret_of(problem)
    with FakeOpenAIServer(lambda messages: "ok") as fake:
        guarded = guarded_engine(OpenAICompatibleEngine("m", base_url=fake.api_base), [problem])
        assert guarded("harmless") == "ok"
        with pytest.raises(AssertionError, match="hidden test"):
            guarded(f"look: {secret}")
        assert fake.completions == 1


def test_optimize_loop_runs_refine_as_a_logged_resumable_step(tmp_path, home, humaneval_problems):
    import yaml
    from mlflow.tracking import MlflowClient

    from critiquelab.experiments.api import optimize
    from critiquelab.experiments.tracking.store import tracking_uri
    from critiquelab.optimizers.export import load_program

    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as task, \
            FakeOpenAIServer(engine_responder(CAREFUL)) as tg_server:
        fake = {"id": "openai/fake", "num_retries": 0}
        spec = {
            "name": "refine-test",
            "pipeline": {"name": "critic_loop", "params": {"max_iterations": 2}},
            "optimizer": {"name": "traces"},
            "split": {"seed": 1, "train": 2, "val": 2},
            "dataset": {"source": "humaneval", "limit": 5},
            "model": {**fake, "api_base": task.api_base},
            "refine": {"role": "coder", "steps": 1,
                       "model": {**fake, "api_base": tg_server.api_base, "temperature": 0.5,
                                 "max_tokens": 99}},
        }
        path = tmp_path / "opt.yaml"
        path.write_text(yaml.safe_dump(spec))
        result = optimize(path, home=home)
        calls = (task.completions, tg_server.completions)
        again = optimize(path, home=home, cache=False)
        assert (task.completions, tg_server.completions) == calls  # finished steps are not re-run
    # Every engine request (the serving preflight aside) carries the configured settings.
    engine_requests = [r for r in tg_server.requests if "Reply with OK." not in json.dumps(r)]
    assert engine_requests and all(
        (r["model"], r["temperature"], r["max_tokens"]) == ("fake", 0.5, 99) for r in engine_requests
    )
    refine = result.steps["refine"]
    assert refine["kept"] is True and result.kept == "refined" and again.steps == result.steps
    assert result.kept_run_id == refine["run_id"] and "refined" not in result.rejected_run_ids
    assert refine["val_after"] >= refine["val_before"]
    program, _ = load_program(result.program_dir)
    assert instruction_of(program, "coder") == CAREFUL
    test = result.steps["test"]
    assert set(test["scores"]) == set(result.split["test"])
    assert set(test["candidates_pass_at_1"]) == {"critic_loop", "critic_loop+compiled", "critic_loop+refined"}
    assert test["pass_at_1"] == test["candidates_pass_at_1"]["critic_loop+refined"]

    client = MlflowClient(tracking_uri(home))
    run = client.get_run(refine["run_id"])
    assert run.info.run_name == "refine" and run.data.metrics["kept"] == 1.0
    assert {"val_before", "val_after"} <= set(run.data.metrics)
    artifacts = {a.path for a in client.list_artifacts(refine["run_id"])}
    assert {"instruction_before.txt", "instruction_after.txt", "program"} <= artifacts
    after = client.download_artifacts(refine["run_id"], "instruction_after.txt", str(tmp_path))
    assert Path(after).read_text() == CAREFUL
    history = client.get_metric_history(result.parent_run_id, "val_pass_at_1")
    assert sorted(m.step for m in history) == [0, 1, 2]
    assert client.get_run(result.parent_run_id).data.tags["critiquelab.kept"] == "refined"
    assert client.get_run(result.steps["test"]["run_id"]).data.params["program"] == "refined"
