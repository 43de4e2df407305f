"""Grounded debate through the runner on real HumanEval problems (scripted LM): its requests show
each solution's results on the prompt's visible examples and no line of a hidden test, and the
judge rule's overrides are counted as a run metric."""

from support.fake_openai import FakeOpenAIServer
from support.leakage import assert_no_hidden_tests
from support.role_responder import ScriptedProblems, role_of, role_responder
from support.specs import fake_spec

from critiquelab.eval.visible_examples import visible_examples
from critiquelab.experiments.api import run
from critiquelab.pipelines.debate.grounding import RESULTS_HEADING

LIMIT = 6


def _scripts(problems):
    scripted = ScriptedProblems(problems)

    def coder(text):  # a wrong proposal: every debater has something to argue about
        return {"code": scripted.wrong(text)}

    def debater(text):  # the second debater (it reads "Debater 1") fixes its solution, the first does not
        fixes = "Debater 1 says" in text
        return {"argument": "the examples decide",
                "revised_code": scripted.solution(text) if fixes else scripted.wrong(text)}

    def judge(text):  # always the first solution: the rule has a wrong choice to replace
        return {"choice": "1", "rationale": "the first", "merged_code": ""}

    return {"coder": coder, "debater": debater, "judge": judge}


def _grounded_run(home, problems):
    pipelines = [{"name": "debate", "params": {"debaters": 2, "rounds": 1, "execution_feedback": True,
                                               "judge_rule": "visible_pass"}}]
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=LIMIT), progress=False)
        return result.children[0], list(fake.requests)


def test_grounded_requests_hold_visible_results_and_no_hidden_test(home, humaneval_problems):
    child, requests = _grounded_run(home, humaneval_problems)
    problems = humaneval_problems[:LIMIT]
    chats = [r for r in requests if "messages" in r]
    assert assert_no_hidden_tests(problems, chats) > 0
    by_role = {}
    for request in chats:
        by_role.setdefault(role_of(request["messages"]), []).append(
            "\n".join(str(m["content"]) for m in request["messages"]))
    assert len(by_role["debater"]) == 2 * LIMIT and len(by_role["judge"]) == LIMIT
    for problem in problems:
        examples = visible_examples(problem.prompt, problem.entry_point)
        judged = next(t for t in by_role["judge"] if problem.prompt.strip() in t)
        argued = [t for t in by_role["debater"] if problem.prompt.strip() in t]
        assert judged.count(RESULTS_HEADING) == 2  # beside each of the two final solutions
        assert len(argued) == 2 and all("[[ ## own_results ## ]]" in t for t in argued)
        assert examples  # HumanEval/0-5 all show examples
        for text in [judged, *argued]:
            for example in examples:  # each visible example's result, by its call as the prompt shows it
                assert f"FAIL: {example.call} returned None, expected {example.expected}" in text
        # the judge read the fixed solution passing them
        assert all(f"PASS: {e.call} returned" in judged for e in examples)
    # Scored like any debate; the rule replaced the judge's failing choice where a solution passed.
    assert child.metrics["pass_at_1"] == 1.0
    assert child.metrics["rule_overrides"] == LIMIT
    assert all(r.extra["judge_decision"] == "chosen" for r in child.results)


def _with_body(script):
    return lambda text, body: script(text)


def test_a_role_max_tokens_bounds_that_role_s_replies_only(home, humaneval_problems):
    pipelines = [{"name": "debate", "params": {"debaters": 2, "rounds": 1},
                  "roles": {"debater": {"max_tokens": 300}, "judge": {"max_tokens": 700}}}]
    scripts = {role: _with_body(script) for role, script in _scripts(humaneval_problems).items()}
    with FakeOpenAIServer(role_responder(scripts, with_body=True), pass_body=True) as fake:
        run(fake_spec(fake.api_base, pipelines=pipelines, limit=1), progress=False)
        requests = [r for r in fake.requests if role_of(r.get("messages", [])) != "unknown"]
    limits = {(role_of(r["messages"]), r.get("max_tokens", r.get("max_completion_tokens"))) for r in requests}
    assert limits == {("coder", 1024), ("debater", 300), ("judge", 700)}


def test_a_role_max_tokens_past_the_bundled_context_is_refused():
    import pytest

    from critiquelab.core.errors import UserError
    from critiquelab.experiments.spec.experiment import parse_spec

    spec = {"name": "x", "model": {"id": "local", "n_ctx": 4096},
            "pipelines": [{"name": "debate", "roles": {"judge": {"max_tokens": 4096}}}]}
    with pytest.raises(UserError, match=r"roles.judge: max_tokens 4096 leaves no room"):
        parse_spec(spec)
    spec["pipelines"][0]["roles"]["judge"]["max_tokens"] = 2048
    assert parse_spec(spec).pipelines[0].roles["judge"].max_tokens == 2048
