"""`critiquelab optimize` on tree_search (issue #16). The scripted coder's code fails the visible
examples, so the repairer (and, with a nonzero value weight, the scorer) run; the compiled program
carries demos for them, no hidden-test line reaches a demo or an LM request, the held-out test
step runs, the export loads back into a fresh tree_search, ``optimizer.roles`` limits what compile
changes, and TextGrad refines the repairer."""

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.leakage import assert_no_hidden_tests
from support.role_responder import role_of
from support.tree_search_scripts import SCORE, tree_search_responder

from critiquelab.experiments.api import export, optimize
from critiquelab.experiments.cli.main import main
from critiquelab.optimizers.export import load_program, load_prompts_into, role_prompts
from critiquelab.optimizers.refine import instruction_of
from critiquelab.optimizers.splits import SplitSpec, make_split
from critiquelab.optimizers.training_examples import (
    assert_no_hidden_tests as assert_no_hidden_tests_in_examples,
)
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.pipelines.tree_search.pipeline import TreeSearch

# A small search in which the scorer matters (λ > 0), with two role calls in flight at once: the
# optimiser must see the calls made on other threads too.
SEARCH = {"n": 2, "max_expansions": 3, "value_weight": 0.5, "evaluation": "lm", "temperature": 0.8,
          "parallel_agents": 2}
SPLIT = {"seed": 1, "train": 3, "val": 2}
LIMIT = 7
REFINED = "Read every failing example's feedback and fix its cause; return the whole function."


def _train_ids(problems):
    return make_split([p.task_id for p in problems[:LIMIT]], SplitSpec(**SPLIT)).train


def _responder(problems):
    """The scripted search; the first train problem stays unsolved, so TextGrad has a failed run
    to learn from."""
    return tree_search_responder(problems, hopeless={_train_ids(problems)[0]})


def _engine(messages):
    """TextGrad's engine: the new instruction when asked to update, else a critique."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    if "<IMPROVED_VARIABLE>" in text:
        return f"<IMPROVED_VARIABLE>{REFINED}</IMPROVED_VARIABLE>"
    return "The instruction does not say to fix the cause of each failing example."


def _spec(tmp_path, api_base, **extra):
    spec = {
        "name": "opt-tree",
        "pipeline": {"name": "tree_search", "params": SEARCH},
        "optimizer": {"name": "bootstrap", "params": {"max_bootstrapped_demos": 2}},
        "split": SPLIT,
        "dataset": {"source": "humaneval", "limit": LIMIT},
        "model": {"id": "openai/fake", "api_base": api_base, "num_retries": 0},
        **extra,
    }
    path = tmp_path / "opt.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _demos(program):
    return {name: [dict(d) for d in predictor.demos] for name, predictor in program.named_predictors()}


def test_optimize_tree_search_gives_repairer_and_scorer_demos_that_export(tmp_path, home, humaneval_problems):
    with FakeOpenAIServer(_responder(humaneval_problems)) as fake:
        result = optimize(_spec(tmp_path, fake.api_base), home=home)
        requests = list(fake.requests)

    assert set(result.steps) == {"baseline_val", "compile", "compiled_val", "gate", "test"}
    test = result.steps["test"]
    assert set(test["scores"]) == set(result.split["test"])  # the held-out step ran on the test split
    assert set(test["candidates_pass_at_1"]) == {"tree_search", "tree_search+compiled"}

    compiled, _ = load_program(result.steps["compile"]["program_dir"])
    demos = _demos(compiled)
    assert demos["repairer"] and demos["scorer"]
    for demo in demos["repairer"]:  # bootstrapped from runs that passed: the repairs are the solutions
        problem = next(p for p in humaneval_problems if p.prompt in demo["repaired_code"])
        assert demo["repaired_code"].strip() == (problem.prompt + problem.canonical_solution).strip()
        assert demo["execution_feedback"] and demo["code"] != demo["repaired_code"]
    assert all(str(d["score"]) == SCORE for d in demos["scorer"])
    every_demo = [d for role in demos.values() for d in role]
    assert_no_hidden_tests_in_examples(every_demo, humaneval_problems)
    assert assert_no_hidden_tests(humaneval_problems, requests) > 0
    # The held-out test ran the compiled program: some repairer request carries demo turns.
    repairs = [r for r in requests if role_of(r["messages"]) == "repairer"]
    assert any(len(r["messages"]) > 2 for r in repairs) and any(len(r["messages"]) == 2 for r in repairs)

    # Round trip: `critiquelab export` of the compile run, loaded into a fresh tree_search.
    export(result.steps["compile"]["run_id"], formats=["json"], out=tmp_path / "exported", home=home)
    loaded, manifest = load_program(tmp_path / "exported")
    assert isinstance(loaded, TreeSearch) and manifest["params"].items() >= SEARCH.items()
    fresh = create_pipeline("tree_search", **SEARCH)
    assert sorted(load_prompts_into(fresh, tmp_path / "exported")) == [
        "coder", "path_reflector", "repairer", "scorer"]
    assert role_prompts(fresh) == role_prompts(loaded) == role_prompts(compiled)
    assert role_prompts(fresh) != role_prompts(create_pipeline("tree_search", **SEARCH))


def test_optimizer_roles_limit_compile_and_refine_rewrites_the_repairer(tmp_path, home, humaneval_problems):
    before = create_pipeline("tree_search", **SEARCH)
    with FakeOpenAIServer(_responder(humaneval_problems)) as task, FakeOpenAIServer(_engine) as engine:
        path = _spec(
            tmp_path, task.api_base,
            optimizer={"name": "bootstrap", "params": {"max_bootstrapped_demos": 2},
                       "roles": ["repairer", "scorer"]},
            refine={"role": "repairer", "steps": 1, "batch_size": None,
                    "model": {"id": "openai/fake", "api_base": engine.api_base, "num_retries": 0}},
        )
        result = optimize(path, home=home)
        engine_requests = list(engine.requests)

    compiled, _ = load_program(result.steps["compile"]["program_dir"])
    demos = _demos(compiled)
    assert demos["repairer"] and demos["scorer"]
    assert demos["coder"] == demos["path_reflector"] == []  # not chosen: left as they were
    assert role_prompts(compiled)["coder"] == role_prompts(before)["coder"]

    refine = result.steps["refine"]
    assert refine["kept"] and result.kept == "refined"
    refined, _ = load_program(result.program_dir)
    assert instruction_of(refined, "repairer") == REFINED
    assert instruction_of(refined, "scorer") == instruction_of(before, "scorer")
    assert _demos(refined)["repairer"] == demos["repairer"]  # refined on top of the compiled program
    assert assert_no_hidden_tests(humaneval_problems, engine_requests) > 0
    assert set(result.steps["test"]["candidates_pass_at_1"]) == {
        "tree_search", "tree_search+compiled", "tree_search+refined"}


REPAIRER_ONLY = {"name": "bootstrap", "params": {"max_bootstrapped_demos": 2}, "roles": ["repairer"]}


def test_bootstrap_counts_only_runs_that_called_a_role_it_may_change(tmp_path, home, humaneval_problems):
    # The first two train problems (bootstrap's order) are solved by the coder alone: two passing
    # runs, the quota, but without a repair. The repairer's demos must come from later ones.
    train = list(_train_ids(humaneval_problems))
    responder = tree_search_responder(humaneval_problems, solved_by_coder=set(train[:2]))
    with FakeOpenAIServer(responder) as fake:
        result = optimize(_spec(tmp_path, fake.api_base, optimizer=REPAIRER_ONLY), home=home)
    demos = _demos(load_program(result.steps["compile"]["program_dir"])[0])
    assert demos["repairer"] and not demos["coder"]
    repaired = {next(p.task_id for p in humaneval_problems if p.prompt in d["repaired_code"])
                for d in demos["repairer"]}
    assert repaired <= set(train[2:])
    assert result.steps["compile"]["changed_roles"] == ["repairer"]


def test_a_compile_that_changed_no_prompt_is_neither_kept_nor_tested(
    tmp_path, home, humaneval_problems, capsys
):
    # Every problem is solved by the coder: no run calls the repairer, so it gets no demo.
    solved = {p.task_id for p in humaneval_problems}
    with FakeOpenAIServer(tree_search_responder(humaneval_problems, solved_by_coder=solved)) as fake:
        assert main(["optimize", str(_spec(tmp_path, fake.api_base, optimizer=REPAIRER_ONLY))]) == 0
    out, err = capsys.readouterr()
    assert ("compile: warning: no prompt changed (roles it may change: repairer); the compiled program "
            "is the original, so it is not kept and not tested") in err
    assert "kept baseline (compile changed no prompt: nothing optimised to keep)" in out
    assert "tree_search+compiled" not in out  # the held-out test ran the unoptimised pipeline alone
    assert "held-out test pass@1: unoptimised 1.000, kept (baseline) 1.000" in out
    assert "kept the unoptimised pipeline: nothing optimised to export\n" in out  # no candidate offered


@pytest.mark.parametrize("roles, expected", [
    (["repairer", "critic"], "optimizer.roles: 'critic' is not a role of pipeline 'tree_search'; "
                             "its roles: coder, path_reflector, repairer, scorer"),
    ([], "optimizer.roles: List should have at least 1 item"),
])
def test_unknown_or_no_optimizer_roles_are_one_line_exit_2(tmp_path, home, capsys, roles, expected):
    from critiquelab.experiments.cli.main import main

    path = _spec(tmp_path, "http://127.0.0.1:9/v1", optimizer={"name": "bootstrap", "roles": roles})
    assert main(["optimize", str(path)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"critiquelab: error: {path}: ") and expected in line and not captured.out
    assert not home.exists() or {p.name for p in home.iterdir()} <= {"datasets"}
