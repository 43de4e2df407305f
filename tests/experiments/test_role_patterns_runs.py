"""The role-pattern pipelines through the runner with a scripted LM: their metrics, their
messages, and no hidden test (nor reference solution, for prompt-only roles) in any request."""

from support.fake_openai import FakeOpenAIServer
from support.leakage import assert_no_hidden_tests, assert_prompt_only
from support.role_responder import ScriptedProblems, review, role_responder
from support.specs import fake_spec

from critiquelab.eval.results import results_table
from critiquelab.eval.statistics import pipeline_summary
from critiquelab.experiments.api import run
from critiquelab.pipelines.vote.outcome import VoteOutcome

# Per problem: 2 of 3 (HumanEval/0) and 1 of 2 (HumanEval/1) written tests are right.
WRITTEN = {
    "has_close_elements": "assert has_close_elements([1.0, 2.0], 0.5) == False\n"
                          "assert has_close_elements([1.0, 1.1], 0.5) == True\n"
                          "assert has_close_elements([1.0, 3.0], 0.5) == True\n",
    "separate_paren_groups": "assert separate_paren_groups('() (())') == ['()', '(())']\n"
                             "assert separate_paren_groups('()') == []\n",
}


def _written(scripted, text):
    return WRITTEN[scripted.problem_in(text).entry_point]


def test_vote_with_generated_tests_reports_their_accuracy_and_leaks_nothing(humaneval_problems):
    problems = humaneval_problems[:2]
    scripted = ScriptedProblems(problems)
    scripts = {
        "coder": lambda text: {"code": scripted.solution(text)},
        "test_writer": lambda text: {"test_code": _written(scripted, text)},
    }
    pipelines = [{"name": "vote", "params": {"k": 2, "tests": "generated", "n_tests": 5}}]
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=2), progress=False)
        requests = list(fake.requests)
    child = result.children[0]
    assert child.metrics["pass_at_1"] == 1.0
    assert child.metrics["generated_tests"] == 5
    assert child.metrics["generated_test_accuracy"] == 3 / 5
    assert [r.extra["generated_tests_correct"] for r in child.results] == [2, 1]
    assert child.metrics["role.test_writer.calls"] == 2
    compared = pipeline_summary(results_table(child.results), figures={"vote": VoteOutcome.table_metrics})
    assert compared["generated_test_accuracy"][0] == 3 / 5  # compare's
    assert assert_no_hidden_tests(problems, requests) > 0
    assert assert_prompt_only(problems, requests, {"test_writer"}) == 2


def test_critic_panel_reports_critique_success_per_critic_kind(humaneval_problems):
    from critiquelab.signatures.focused_critic import FOCUS_INSTRUCTIONS

    problems = humaneval_problems[:2]
    scripted = ScriptedProblems(problems)

    def critic(text):
        code = text.rsplit("[[ ## code ## ]]", 1)[-1]
        if "first draft" in code and FOCUS_INSTRUCTIONS["correctness"] in text:
            return review("request_changes", "returns a placeholder")
        return review("approve")

    scripts = {
        "coder": lambda text: {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"},
        "critic": critic,
        "fixer": lambda text: {"revised_code": scripted.solution(text)},
    }
    pipelines = [{"name": "critic_loop", "params": {"critics": ["correctness", "edge_cases"],
                                                    "execution_feedback": True}}]
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=2), progress=False)
        requests = list(fake.requests)
    metrics = result.children[0].metrics
    assert metrics["pass_at_1"] == 1.0 and metrics["critique_success_rate"] == 1.0
    assert metrics["changes_requested.correctness"] == 2
    assert metrics["critique_success_rate.correctness"] == 1.0
    assert "changes_requested.edge_cases" not in metrics  # it never asked: nothing to rate
    assert metrics["role.critic_correctness.calls"] == metrics["role.critic_edge_cases.calls"] == 4
    assert assert_no_hidden_tests(problems, requests) > 0


def test_sop_counts_handoffs_scores_qa_tests_and_keeps_its_roles_to_the_prompt(humaneval_problems):
    import json

    problems = humaneval_problems[:2]
    scripted = ScriptedProblems(problems)

    def spec(text):
        problem = scripted.problem_in(text)
        return {"spec": json.dumps({"function": problem.entry_point, "inputs": ["see the prompt"],
                                    "output": "see the prompt", "edge_cases": [], "examples": []})}

    def design(text):
        return {"design": json.dumps({"signature": "def f():", "helpers": [], "approach": "as specified"})}

    scripts = {
        "product_manager": spec, "architect": design,
        "engineer": lambda text: {"implementation_code": scripted.solution(text)},
        "qa_engineer": lambda text: {"acceptance_test_code": _written(scripted, text)},
    }
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        result = run(fake_spec(fake.api_base, pipelines=[{"name": "sop"}], limit=2), progress=False)
        requests = list(fake.requests)
    child = result.children[0]
    assert child.metrics["pass_at_1"] == 1.0
    # QA's wrong tests fail the reference code, so each problem goes round to max_iterations.
    assert [r.extra["stop_reason"] for r in child.results] == ["max_iterations", "max_iterations"]
    assert child.metrics["generated_test_accuracy"] == 3 / 5
    # spec, design, 3 versions of code, 3 QA reports (the engineer declines a 4th version)
    assert sum(r.extra["handoffs"] for r in child.results) == 2 * (2 + 3 + 3)
    assert child.metrics["handoff_rejections"] == child.metrics["unvalidated_handoffs"] == 0
    assert assert_no_hidden_tests(problems, requests) > 0
    assert assert_prompt_only(problems, requests, {"product_manager", "architect", "qa_engineer"}) == 6


def test_role_play_counts_failure_modes_and_keeps_hidden_tests_out(humaneval_problems):
    problems = humaneval_problems[:2]
    scripted = ScriptedProblems(problems)
    turns = []

    def assistant(text):  # the first problem's assistant repeats itself: a turn without progress
        turns.append(text)
        problem = scripted.problem_in(text)
        return {"solution_code": problem.prompt + ("    return 0\n" if problem is problems[0]
                                                   else f"    return {len(turns)}\n")}

    scripts = {
        "task_specifier": lambda text: {"specified_task": "Implement it as the docstring says."},
        "instructor": lambda text: {"instruction": f"Improve it, take {text.count('Improve it')}.",
                                    "task_done": "False"},
        "assistant": assistant,
    }
    pipelines = [{"name": "role_play", "params": {"max_turns": 3}}]
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=2), progress=False)
        requests = list(fake.requests)
    child = result.children[0]
    assert [r.extra["stop_reason"] for r in child.results] == ["no_progress", "max_turns"]
    assert child.metrics["no_progress_turns"] == 1
    assert child.metrics["role_flips"] == child.metrics["repeated_instructions"] == 0
    assert assert_no_hidden_tests(problems, requests) > 0
    assert assert_prompt_only(problems, requests, {"task_specifier"}) == 2


def test_the_role_patterns_experiment_runs_every_pipeline_and_compares(home, humaneval_problems):
    """experiments/role_patterns.yaml against a scripted endpoint: all six pipelines run, both
    votes get sop's measured tokens as their budget, and compare's table has every label."""
    import json
    from pathlib import Path

    import yaml
    from mlflow.tracking import MlflowClient

    from critiquelab.experiments.spec.experiment import parse_spec
    from critiquelab.experiments.tracking.store import tracking_uri

    problems = humaneval_problems[:1]
    scripted = ScriptedProblems(problems)
    spec = {"function": "has_close_elements", "inputs": ["numbers", "threshold"], "output": "bool"}
    scripts = {
        "coder": lambda t: {"code": scripted.solution(t)},
        "critic": lambda t: review("approve"),
        "product_manager": lambda t: {"spec": json.dumps(spec)},
        "architect": lambda t: {"design": json.dumps({"signature": "def f():", "approach": "loops"})},
        "engineer": lambda t: {"implementation_code": scripted.solution(t)},
        "qa_engineer": lambda t: {"acceptance_test_code": _written(scripted, t)},
        "task_specifier": lambda t: {"specified_task": "Compare every pair."},
        "instructor": lambda t: {"instruction": "Write it.", "task_done": str("PASS" in t)},
        "assistant": lambda t: {"solution_code": scripted.solution(t)},
        "test_writer": lambda t: {"test_code": _written(scripted, t)},
    }
    data = yaml.safe_load(Path("experiments/role_patterns.yaml").read_text())
    data["model"] = {"id": "openai/fake", "num_retries": 0}
    data["dataset"]["limit"] = 1
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        data["model"]["api_base"] = fake.api_base
        result = run(data, progress=False)
    labels = ["baseline", "critic_panel", "sop", "role_play", "vote_visible", "vote_generated"]
    assert [c.pipeline for c in result.children] == labels
    assert all(c.metrics["pass_at_1"] == 1.0 for c in result.children)
    sop = result.children[2]
    for vote in result.children[4:]:
        params = MlflowClient(tracking_uri(home)).get_run(vote.run_id).data.params
        assert float(params["pipeline.resolved.token_budget"]) == sop.metrics["tokens_per_problem"]
    assert list(result.comparison.table["pipeline"]) == labels
    table = result.comparison.table.set_index("pipeline")
    assert table.loc["vote_generated", "generated_test_accuracy"] == 2 / 3
    parse_spec(yaml.safe_load(Path("experiments/debate_topology.yaml").read_text()))  # valid too
