"""critic_loop (and tree_search) through the runner: pool persistence, message log, metrics, and
no leakage of hidden tests into any LM request."""

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, review, role_responder
from support.specs import fake_spec

from critiquelab.eval.datasets import load_problems
from critiquelab.eval.visible_examples import visible_examples
from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
from critiquelab.runtime.pool.message_pool import MessagePool


def _scripts(problems):
    scripted = ScriptedProblems(problems)

    def coder(text):  # wrong first, with a marker the critic recognises
        return {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"}

    def critic(text):
        code = text.rsplit("[[ ## code ## ]]", 1)[-1]
        return review("request_changes", "a placeholder") if "first draft" in code else review("approve")

    def fixer(text):
        return {"revised_code": scripted.solution(text)}

    def meta_critic(text):
        return {"wrong_findings": "[]", "missing_issues": "[]", "review_is_sound": "True"}

    def repairer(text):  # tree_search's repairer
        return {"repaired_code": scripted.solution(text)}

    return {"coder": coder, "critic": critic, "fixer": fixer, "meta_critic": meta_critic,
            "repairer": repairer, "path_reflector": lambda text: {"reflection": "Implement it."}}


def _assert_no_hidden_test_line(problems, requests):
    """Hidden tests never reach a prompt: no line of any test that is not already in the
    problem's prompt appears in any request sent to the LM."""
    sent = "\n".join(json.dumps(r) for r in requests)
    sent_raw = "\n".join(str(m.get("content", "")) for r in requests for m in r.get("messages", []))
    for problem in problems:
        for line in problem.test.splitlines():
            line = line.strip()
            if len(line) >= 12 and line not in problem.prompt:
                assert line not in sent_raw and json.dumps(line)[1:-1] not in sent, (problem.task_id, line)


def test_critic_loop_run_logs_messages_and_revision_metrics(home, humaneval_problems):
    pipelines = [{"name": "critic_loop", "params": {"execution_feedback": True, "meta_critic": True}}]
    with FakeOpenAIServer(role_responder(_scripts(humaneval_problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=20), progress=False)
        requests = list(fake.requests)
    child = result.children[0]
    assert child.metrics["first_pass_at_1"] == 0.0
    assert child.metrics["pass_at_1"] == 1.0
    assert child.metrics["critique_success_rate"] == 1.0
    assert "harmful_revision_rate" not in child.metrics  # no first draft passed: none to harm
    assert child.metrics["messages_per_problem"] >= 7  # assignment, code, feedback, critique, meta, fix, …
    assert child.metrics["role.critic.calls"] == 40

    # The message log is an MLflow artifact and the pool persisted every message in Chroma.
    client = MlflowClient(tracking_uri(home))
    logged = client.get_run(child.run_id).data.metrics
    assert logged["critique_success_rate"] == 1.0 and "harmful_revision_rate" not in logged
    log = client.download_artifacts(child.run_id, "messages.jsonl")
    messages = [json.loads(line) for line in Path(log).read_text().splitlines()]
    assert {m["run_id"] for m in messages} == {child.run_id}
    assert {m["task_id"] for m in messages} == {p.task_id for p in humaneval_problems[:20]}
    with MessagePool(ChromaPoolStore(home / "chroma")) as reopened:
        assert len(reopened.history(run_id=child.run_id)) == len(messages)

    _assert_no_hidden_test_line(humaneval_problems[:20], requests)


def test_tree_search_run_repairs_from_visible_feedback_and_sends_no_hidden_test(home, humaneval_problems):
    pipelines = [{"name": "tree_search", "params": {"n": 2, "max_expansions": 3}}]
    with FakeOpenAIServer(role_responder(_scripts(humaneval_problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=20), progress=False)
        requests = list(fake.requests)
    child = result.children[0]
    # Problems whose prompt shows runnable examples are repaired to the reference solution;
    # the others have no visible failure to stop on, so the search spends its expansions.
    assert child.metrics["pass_at_1"] >= 0.8
    assert all(len(r.extra["nodes_passed"]) == r.extra["nodes"] for r in child.results)
    assert sum(any(r.extra["nodes_passed"]) for r in child.results) == 20
    assert child.metrics["role.repairer.calls"] > 0 and child.metrics["role.path_reflector.calls"] > 0
    _assert_no_hidden_test_line(humaneval_problems[:20], requests)


def test_default_experiment_spec_runs_all_four_pipelines(home, humaneval_problems):
    """experiments/debate_vs_critic.yaml against a scripted endpoint (fast): every pipeline runs,
    and vote's token budget is resolved from debate's measured tokens."""
    import yaml
    from support.fake_openai import chat_reply

    scripted = ScriptedProblems(humaneval_problems)
    scripts = {
        "coder": lambda t: {"code": scripted.solution(t)},
        "critic": lambda t: review("approve"),
        "debater": lambda t: {"argument": "fine", "revised_code": scripted.solution(t)},
        "judge": lambda t: chat_reply(choice="1", rationale="first", merged_code=""),
    }
    data = yaml.safe_load(Path("experiments/debate_vs_critic.yaml").read_text())
    data["model"] = {"id": "openai/fake", "num_retries": 0}
    data["dataset"]["limit"] = 2
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        data["model"]["api_base"] = fake.api_base
        result = run(data, progress=False)
    assert [c.pipeline for c in result.children] == ["baseline", "critic_loop", "debate", "vote"]
    assert all(c.metrics["pass_at_1"] == 1.0 for c in result.children)
    debate, vote = result.children[2], result.children[3]
    assert debate.metrics["consensus_rate"] == 1.0
    params = MlflowClient(tracking_uri(home)).get_run(vote.run_id).data.params
    assert float(params["pipeline.resolved.token_budget"]) == debate.metrics["tokens_per_problem"]
    # every value that shaped the run is logged, defaults the spec left out included
    assert (params["pipeline.params.token_budget_from"], params["pipeline.params.k"]) == ("debate", "5")
    assert vote.metrics["tokens_per_problem"] >= debate.metrics["tokens_per_problem"] * 0.5


DATA = Path(__file__).parents[1] / "eval" / "data"


def _hidden_pieces(name):
    """What the source file hides from the model, by task id: MBPP's assert lines after the
    first (the one its prompt shows) and its challenge tests; EvalPlus's inputs (an argument
    list's JSON, as it would be written in a prompt) that its own prompt does not show."""
    rows = [json.loads(line) for line in (DATA / name).read_text().splitlines()]
    if name.startswith("mbpp"):
        return {str(r["task_id"]): r["test_list"][1:] + r["challenge_test_list"] for r in rows}
    return {r["task_id"]: [piece for a in r["base_input"] + r["plus_input"]
                           if (piece := json.dumps(a)[1:-1]) not in r["prompt"]] for r in rows}


@pytest.mark.parametrize(
    ("name", "pipeline", "shown"),
    [("mbpp.jsonl", "critic_loop", "FAIL: digit_square_sum(123) returned 'first draft', expected 14"),
     ("evalplus.jsonl", "critic_loop",
      "FAIL: running_max([1, 3, 2]) returned 'first draft', expected [1, 3, 3]"),
     ("mbpp.jsonl", "tree_search", "Example: digit_square_sum(123)\n  expected: 14\n  got: 'first draft'"),
     ("evalplus.jsonl", "tree_search",
      "Example: running_max([1, 3, 2])\n  expected: [1, 3, 3]\n  got: 'first draft'")],
)
def test_no_hidden_test_of_the_other_formats_reaches_a_prompt(home, name, pipeline, shown):
    """MBPP's hidden asserts and EvalPlus's hidden inputs stay out of every LM request, while
    execution feedback (the critic's, tree search's repairer's) does run the example the prompt
    shows."""
    problems = load_problems(str(DATA / name))
    problem_in = ScriptedProblems(problems).problem_in
    scripts = _scripts(problems)
    scripts["coder"] = lambda text: {"code": f"def {problem_in(text).entry_point}(*args):\n"
                                             "    return 'first draft'\n"}
    params = {"execution_feedback": True} if pipeline == "critic_loop" else {"n": 2}
    pipelines = [{"name": pipeline, "params": params}]
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        spec = fake_spec(fake.api_base, pipelines=pipelines, dataset={"source": str(DATA / name)})
        result = run(spec, progress=False)
        requests = list(fake.requests)
    if pipeline == "critic_loop":
        assert result.children[0].metrics["pass_at_1"] == 1.0  # the fixer's reference code passes
    else:  # the repair is chosen where a visible example tells it from the draft, and only there
        for r in result.children[0].results:
            problem = next(p for p in problems if p.task_id == r.task_id)
            assert r.passed == bool(visible_examples(problem.prompt, problem.entry_point)), r.task_id

    sent = "\n".join(json.dumps(r) for r in requests)
    sent_raw = "\n".join(str(m.get("content", "")) for r in requests for m in r.get("messages", []))
    assert shown in sent_raw
    hidden = _hidden_pieces(name)
    checked = 0
    for problem in problems:
        pieces = hidden[problem.task_id] + [line.strip() for line in problem.test.splitlines()
                                            if line.strip() not in problem.prompt]
        for piece in pieces:  # (the scripted fixer sends the reference code on purpose)
            if len(piece) >= 5 and piece not in problem.canonical_solution:
                checked += 1
                assert piece not in sent_raw and json.dumps(piece)[1:-1] not in sent, (problem.task_id, piece)
    assert checked >= 3 * len(problems)
