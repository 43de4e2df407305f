"""The issue #16 experiment specs against a scripted endpoint: search_vs_vote.yaml (all five
pipelines run, the budgets chain: tree_search from critic_loop, vote from tree_search; compare at
the end) ceiling.yaml (20 samples, their unbiased pass@k in the run and in compare's table),
visible_selection.yaml (each selection rule answers what it should),
optimize_tree_search.yaml (valid as shipped, as is its LM-value variant; every optimisation step
runs, and only the roles it names take demos) and distinguishing_selection.yaml (each rule answers
what it should, and no role reads a hidden test)."""

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer
from support.leakage import assert_no_hidden_tests, assert_prompt_only
from support.role_responder import ScriptedProblems, review, role_responder
from support.tree_search_scripts import tree_search_responder

from critiquelab.eval.metrics import pass_at_k
from critiquelab.experiments.api import optimize, run
from critiquelab.experiments.tracking.store import tracking_uri


def test_search_vs_vote_runs_its_five_pipelines_at_chained_budgets(home, humaneval_problems):
    scripted = ScriptedProblems(humaneval_problems)
    scripts = {  # the draft is wrong, so every pipeline has something to repair
        "coder": lambda t: {"code": scripted.wrong(t)},
        "critic": lambda t: review("request_changes", "returns None"),
        "fixer": lambda t: {"revised_code": scripted.solution(t)},
        "repairer": lambda t: {"repaired_code": scripted.solution(t)},
        "path_reflector": lambda t: {"reflection": "Implement the function."},
    }
    data = yaml.safe_load(Path("experiments/search_vs_vote.yaml").read_text())
    data["model"] = {"id": "openai/fake", "num_retries": 0}
    data["dataset"]["limit"] = 2
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        data["model"]["api_base"] = fake.api_base
        result = run(data, progress=False)
    labels = [c.pipeline for c in result.children]
    assert labels == ["baseline", "critic_loop", "tree_search", "vote", "greedy_filter"]
    by_label = dict(zip(labels, result.children, strict=True))
    assert by_label["baseline"].metrics["pass_at_1"] == 0.0
    assert by_label["critic_loop"].metrics["pass_at_1"] == by_label["tree_search"].metrics["pass_at_1"] == 1.0
    client = MlflowClient(tracking_uri(home))
    params = {c.pipeline: client.get_run(c.run_id).data.params for c in result.children}
    assert float(params["tree_search"]["pipeline.resolved.token_budget"]) == (
        by_label["critic_loop"].metrics["tokens_per_problem"])
    for label in ("vote", "greedy_filter"):
        assert float(params[label]["pipeline.resolved.token_budget"]) == (
            by_label["tree_search"].metrics["tokens_per_problem"])
    assert by_label["greedy_filter"].metrics["greedy_answer_rate"] == 0.0  # the wrong draft fails them
    assert result.comparison is not None and len(result.comparison.pairs) == 10



def _run_on_two_problems(spec_path, coder, **scripts):
    """A shipped spec on its first two problems against a scripted coder that sees each request's
    body (temperature, seed), and other roles' ``scripts``; the run's result and the requests the
    endpoint received."""
    data = yaml.safe_load(Path(spec_path).read_text())
    data["dataset"]["limit"] = 2
    responder = role_responder({"coder": coder, **scripts}, with_body=True)
    with FakeOpenAIServer(responder, pass_body=True) as fake:
        data["model"] = {"id": "openai/fake", "num_retries": 0, "api_base": fake.api_base}
        return run(data, progress=False), list(fake.requests)

def test_ceiling_spec_reports_unbiased_pass_at_k_of_twenty_samples(home, humaneval_problems):
    scripted = ScriptedProblems(humaneval_problems)

    def coder(text, body):  # sample i (seed i) passes for i < 3 on the first problem, never on the second
        first = scripted.problem_in(text).task_id == "HumanEval/0"
        right = first and body.get("temperature", 0) > 0 and body["seed"] < 3
        return {"code": scripted.solution(text) if right else scripted.wrong(text)}

    result, _ = _run_on_two_problems("experiments/ceiling.yaml", coder)
    samples = result.children[1]
    assert samples.pipeline == "samples20"
    assert [len(r.extra["samples_passed"]) for r in samples.results] == [20, 20]
    for k in (1, 5, 10, 20):
        assert samples.metrics[f"samples_pass_at_{k}"] == pytest.approx((pass_at_k(20, 3, k) + 0.0) / 2)
    row = result.comparison.table.set_index("pipeline").loc["samples20"]
    assert row["samples_pass@20"] == pytest.approx(0.5) and row["samples_pass@1"] == pytest.approx(3 / 40)



def test_visible_selection_spec_each_rule_answers_as_it_should(home, humaneval_problems):
    """HumanEval/0: the greedy answer and samples 0-11 are wrong alike, 12-19 right; HumanEval/1:
    the greedy answer is right, every sample wrong. Agreement follows the wrong majority, the
    visible filter finds the right minority, greedy first keeps a greedy answer that passes the
    visible examples (one call) and otherwise needs right samples among its k."""
    scripted = ScriptedProblems(humaneval_problems)

    def coder(text, body):
        first = scripted.problem_in(text).task_id == "HumanEval/0"
        greedy = body.get("temperature", 0) == 0
        right = (not greedy and body["seed"] >= 12) if first else greedy
        return {"code": scripted.solution(text) if right else scripted.wrong(text)}

    result, requests = _run_on_two_problems("experiments/visible_selection.yaml", coder)
    assert assert_no_hidden_tests(humaneval_problems[:2], requests) > 0  # greedy and samples alike
    passed = {c.pipeline: [r.passed for r in c.results] for c in result.children}
    assert passed == {
        "baseline": [False, True], "vote20": [False, False], "filter20": [True, False],
        "greedy_filter10": [False, True], "greedy_filter20": [True, True],
    }
    greedy_first = {c.pipeline: [r.lm_calls for r in c.results] for c in result.children}
    assert greedy_first["greedy_filter10"] == [11, 1] and greedy_first["greedy_filter20"] == [21, 1]
    assert result.children[-1].metrics["greedy_answer_rate"] == 0.5


def test_distinguishing_selection_spec_each_rule_answers_as_it_should(home, humaneval_problems):
    """HumanEval/0: the greedy answer and the even samples pass the prompt's two examples by
    counting the numbers (weak examples), the odd samples are right; a written input tells them
    apart, and a judge that picks the challenger replaces the greedy answer, where agreement follows
    the counting majority and both needs the two to concur. HumanEval/1: every candidate is right
    alike, so no input is written. No hidden-test line reaches any role."""
    scripted = ScriptedProblems(humaneval_problems)
    counting = humaneval_problems[0].prompt + "    return len(numbers) > 5\n"

    def coder(text, body):
        if scripted.problem_in(text).task_id == "HumanEval/1":
            return {"code": scripted.solution(text)}
        right = body.get("temperature", 0) > 0 and body["seed"] % 2 == 1
        return {"code": scripted.solution(text) if right else counting}

    written = ["has_close_elements([1.0, 1.05], 0.1)", "has_close_elements([1.0])"]  # the second: arity
    result, requests = _run_on_two_problems(
        "experiments/distinguishing_selection.yaml", coder,
        input_writer=lambda text, body: {"inputs": json.dumps(written)},
        pairwise_judge=lambda text, body: {"reason": "1.0 and 1.05 are closer than 0.1", "right_output": "B"},
    )
    assert assert_no_hidden_tests(humaneval_problems[:2], requests) > 0
    assert assert_prompt_only(humaneval_problems[:2], requests, {"input_writer"}) >= 1
    passed = {c.pipeline: [r.passed for r in c.results] for c in result.children}
    assert passed == {"baseline": [False, True], "greedy_filter10": [False, True], "pairwise": [True, True],
                      "agreement": [False, True], "both": [False, True]}
    by_label = {c.pipeline: c for c in result.children}
    first = {label: by_label[label].results[0].extra for label in ("pairwise", "agreement", "both")}
    for extra in first.values():
        assert (extra["inputs_kept"], extra["inputs_dropped"], extra["groups"]) == (1, 1, 2)
        assert extra["candidates_passed"] == [False, False, True, False, True]  # greedy, samples 0-3
    assert [first[label]["judge_calls"] for label in ("pairwise", "agreement", "both")] == [1, 0, 1]
    assert by_label["pairwise"].metrics["greedy_replaced_right"] == 1
    assert by_label["pairwise"].metrics["selection_accuracy"] == 1.0
    assert by_label["agreement"].metrics["selection_accuracy"] == 0.5
    assert by_label["both"].metrics["greedy_replaced"] == 0
    # Each rule's samples are the same requests (vote's too): only the first to draw them reaches the
    # endpoint, later ones are LM-cache hits.
    assert [r.extra["samples"] for r in by_label["both"].results] == [4, 4]
    assert all(r.cached_lm_calls >= 5 for r in by_label["both"].results)


def test_optimize_tree_search_spec_is_valid_and_optimises_the_repairer_alone(
    tmp_path, home, humaneval_problems
):
    from critiquelab.experiments.optimize.spec import check_spec, load_optimize_spec
    from critiquelab.experiments.spec.experiment import parse_spec
    from critiquelab.optimizers.export import load_program

    path = Path("experiments/optimize_tree_search.yaml")
    shipped = load_optimize_spec(path)
    check_spec(shipped)  # as shipped: the pipeline builds, its roles exist, the bundled model is named
    # search_vs_vote's tree search, so its unoptimised runs are the LM cache's: the value is the
    # visible pass rate alone, so the scorer is never called and has nothing to learn
    # (the budget that run resolved from the critic loop, given as a number)
    measured_spec = parse_spec(yaml.safe_load(Path("experiments/search_vs_vote.yaml").read_text()))
    measured = next(p for p in measured_spec.pipelines if p.name == "tree_search")
    shipped_params = shipped.pipeline.params.model_dump()
    differs = {k for k, v in measured.params.model_dump().items() if shipped_params[k] != v}
    assert differs == {"token_budget_from", "token_budget"} and shipped_params["value_weight"] == 0
    # Its LM-value variant: the same search but for lambda, and the scorer takes demos too.
    value = load_optimize_spec(Path("experiments/optimize_tree_search_value.yaml"))
    check_spec(value)
    assert value.pipeline.params.model_copy(update={"value_weight": 0.0}) == shipped.pipeline.params
    assert value.pipeline.params.value_weight == 0.5 and value.optimizer.roles == ["repairer", "scorer"]
    assert value.split == shipped.split
    data = yaml.safe_load(path.read_text())
    assert (shipped.split.train, shipped.split.val) == (20, 20)  # counts: the rest of the set is test
    data["dataset"]["limit"] = 8
    data["split"].update(train=4, val=2)  # 4/2/2 on the 8 scripted problems
    with FakeOpenAIServer(tree_search_responder(humaneval_problems)) as fake:
        data["model"] = {"id": "openai/fake", "num_retries": 0, "api_base": fake.api_base}
        spec_file = tmp_path / "optimize_tree_search.yaml"
        spec_file.write_text(yaml.safe_dump(data))
        result = optimize(spec_file, home=home)
    assert set(result.steps) == {"baseline_val", "compile", "compiled_val", "gate", "test"}
    compiled, _ = load_program(result.steps["compile"]["program_dir"])
    with_demos = {name for name, predictor in compiled.named_predictors() if predictor.demos}
    assert with_demos == set(shipped.optimizer.roles) == {"repairer"}
