"""The oracle_feedback positive control through the runner: its fixer (and self_refine's refiner)
reads what the hidden tests say about the code it revises — the one arm whose requests may carry
a hidden-test line — while the same pipeline without the control never sends one, and keeps the
keys it had before controls existed."""

from __future__ import annotations

import pytest
from support.fake_openai import FakeOpenAIServer
from support.leakage import assert_no_hidden_tests
from support.role_responder import ScriptedProblems, review, role_of, role_responder
from support.specs import fake_spec

from experiments.api import run
from experiments.checkpoints import cost_keys
from experiments.spec import parse_spec
from pipelines.controls import oracle_feedback
from pipelines.registry import validate_params

LIMIT = 3


def _scripts(problems):
    """A wrong first draft, a critic that always asks for changes on it, and a fixer that can only
    repair from the hidden tests' report: it writes the solution when told FAIL, else echoes."""
    scripted = ScriptedProblems(problems)

    def coder(text):
        return {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"}

    def critic(text):
        code = text.rsplit("code", 1)[-1]
        return review("request_changes", "looks wrong") if "first draft" in code else review("approve")

    def fixer(text):
        if "FAIL (assertion)" in text:
            return {"revised_code": scripted.solution(text)}
        return {"revised_code": scripted.problem_in(text).prompt + "    return 'first draft'\n"}

    def self_feedback(text):
        code = text.rsplit("code", 1)[-1]
        return {"is_correct": str("first draft" not in code), "feedback": "Check the result."}

    return {"coder": coder, "critic": critic, "fixer": fixer, "self_feedback": self_feedback}


def _run(problems, name, params, home):
    pipelines = [{"name": name, "params": {"max_iterations": 1, **params}}]
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=LIMIT), progress=False)
        return result.children[0], list(fake.requests)


def _fixer_texts(requests):
    return ["\n".join(str(m.get("content", "")) for m in r["messages"])
            for r in requests if "messages" in r and role_of(r["messages"]) == "fixer"]


@pytest.mark.parametrize("name", ["critic_loop", "self_refine"])
def test_the_control_s_fixer_reads_the_hidden_assert_and_without_it_never(home, humaneval_problems, name):
    problems = humaneval_problems[:LIMIT]
    plain, plain_requests = _run(humaneval_problems, name, {}, home)
    assert assert_no_hidden_tests(problems, [r for r in plain_requests if "messages" in r]) > 0
    assert plain.metrics["pass_at_1"] == 0.0  # the fixer echoes the draft without the tests' report

    control, requests = _run(humaneval_problems, name, {"control": "oracle_feedback"}, home)
    fixes = {ScriptedProblems(problems).problem_in(text).task_id: text for text in _fixer_texts(requests)}
    assert set(fixes) == {p.task_id for p in problems}
    for problem in problems:
        text = fixes[problem.task_id]
        failing = next(line for line in text.splitlines() if line.startswith("failing check: "))
        hidden_assert = failing.removeprefix("failing check: ").split("  (`candidate`")[0]
        assert hidden_assert in problem.test and hidden_assert not in problem.prompt
        assert "returned: 'first draft'" in text  # about the version under revision
    assert control.metrics["pass_at_1"] == 1.0  # the report is what repairs it


def test_without_the_control_keys_are_those_of_a_pipeline_without_the_param():
    params = validate_params("critic_loop", {})
    assert "control" not in params.key_values()
    control = validate_params("critic_loop", {"control": "oracle_feedback"})
    assert control.key_values()["control"] == "oracle_feedback"

    def keys(pipeline_params):
        spec = parse_spec({"name": "k", "pipelines": [{"name": "critic_loop", "params": pipeline_params}]})
        return cost_keys(spec, "model", "data", {})["critic_loop"]

    assert keys({}) == keys({"control": "none"}) != keys({"control": "oracle_feedback"})


def test_the_oracle_is_the_runner_s_to_bind():
    with pytest.raises(RuntimeError, match="only the runner binds"):
        oracle_feedback("def f():\n    return 1\n")
