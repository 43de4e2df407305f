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

from critiquelab.experiments.api import run
from critiquelab.experiments.checkpoints import cost_keys
from critiquelab.experiments.spec.experiment import parse_spec
from critiquelab.pipelines.controls import oracle_feedback
from critiquelab.pipelines.registry import validate_params

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


def _search_and_retry_scripts(problems):
    """reflexion's and tree search's roles, scripted so that only the hidden tests' report can
    repair: a first attempt that returns None (it fails the visible examples); a reflector whose
    lesson names the report only when it read one, and a coder whose retry is right only after
    that lesson; a repairer that is right only when it read the report."""
    scripted = ScriptedProblems(problems)
    seen = "Read the failing hidden check."

    def coder(text):
        return {"code": scripted.solution(text) if seen in text else scripted.wrong(text)}

    def reflector(text):
        lesson = seen if "FAIL (assertion)" in text else "Look at the examples again."
        return {"what_went_wrong": "it returned None", "what_worked": "nothing", "pattern": "stub",
                "lesson": lesson}

    def repairer(text):
        told = "FAIL (assertion)" in text
        return {"repaired_code": scripted.solution(text) if told else scripted.wrong(text)}

    return {"coder": coder, "reflector": reflector, "repairer": repairer,
            "scorer": lambda text: {"assessment": "unsure", "score": "5"},
            "path_reflector": lambda text: {"reflection": "Compute the result."}}


SEARCH_AND_RETRY = {
    "reflexion": ({"max_trials": 2}, "reflector"),
    "tree_search": ({"n": 1, "max_expansions": 2, "reflect": False, "greedy_first": False}, "repairer"),
}


@pytest.mark.parametrize("name", list(SEARCH_AND_RETRY))
def test_reflexion_s_reflector_and_tree_search_s_repairer_read_the_hidden_report_only_as_the_control(
    home, humaneval_problems, name
):
    params, reviser = SEARCH_AND_RETRY[name]
    problems = humaneval_problems[:LIMIT]
    found = {}
    for control in ("none", "oracle_feedback"):
        pipelines = [{"name": name, "params": {**params, "control": control}}]
        with FakeOpenAIServer(role_responder(_search_and_retry_scripts(humaneval_problems))) as fake:
            result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=LIMIT), progress=False)
            requests = [r for r in fake.requests if "messages" in r]
        found[control] = result.children[0], requests
    plain, plain_requests = found["none"]
    assert assert_no_hidden_tests(problems, plain_requests) > 0
    assert plain.metrics["pass_at_1"] == 0.0  # nothing but the report can repair these

    control, requests = found["oracle_feedback"]
    revisions = ["\n".join(str(m.get("content", "")) for m in r["messages"])
                 for r in requests if role_of(r["messages"]) == reviser]
    scripted = ScriptedProblems(problems)
    assert {scripted.problem_in(t).task_id for t in revisions} == {p.task_id for p in problems}
    for text in revisions:
        problem = scripted.problem_in(text)
        failing = next(line for line in text.splitlines() if line.startswith("failing check: "))
        assert failing.removeprefix("failing check: ").split("  (`candidate`")[0] in problem.test
        assert "returned: None" in text  # about the version under revision
    assert control.metrics["pass_at_1"] == 1.0
