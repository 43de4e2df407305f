"""Code demos are kept only when their code passes their train task's hidden tests (issue #16):
a run that passed in the end also holds the first drafts and repairs that failed."""

import threading

import dspy
import yaml
from mlflow.tracking import MlflowClient
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, role_of, role_responder
from support.tree_search_scripts import tree_search_responder

from critiquelab.eval.scoring import score_code
from critiquelab.experiments.api import optimize
from critiquelab.optimizers.compile import CompileConfig, compile_program
from critiquelab.optimizers.demo_filter import CodeDemoFilter, code_output_fields
from critiquelab.optimizers.training_examples import RoleTrace
from critiquelab.pipelines.registry import create_pipeline, pipeline_names
from critiquelab.pipelines.tree_search.pipeline import TreeSearch, TreeSearchParams
from critiquelab.signatures.developer import Developer

# One role call at a time: which of a task's repairs DSPy picks as its demo is then reproducible.
SEARCH = {"n": 2, "max_expansions": 3, "value_weight": 0.5, "evaluation": "lm", "parallel_agents": 1}


def _passes(problems, demo, field):
    problem = next(p for p in problems if p.prompt.strip() == str(demo["prompt"]).strip())
    return score_code(problem, str(demo[field]), 10.0)[1].passed


def _flaky_repairs(problems, flaky):
    """The scripted tree search, except that the first repair of each ``flaky`` problem is wrong
    too: those runs pass in the end, with a failed repair beside the good one."""
    scripted, scripted_search = ScriptedProblems(problems), tree_search_responder(problems)
    repaired, lock = set(), threading.Lock()

    def respond(messages):
        if role_of(messages) == "repairer":
            text = str(messages[-1]["content"])
            with lock:
                task_id = scripted.problem_in(text).task_id
                first = task_id in flaky and task_id not in repaired
                repaired.add(task_id)
            if first:
                return f"```python\n{scripted.wrong(text)}\n```"
        return scripted_search(messages)

    return respond


def test_code_fields_are_the_solutions_roles_write_not_their_tests():
    fields = {}
    for name in pipeline_names():
        for _, predictor in create_pipeline(name).named_predictors():
            fields[predictor.signature.__name__] = code_output_fields(predictor.signature)
    assert fields["Coder"] == ("code",) and fields["Repairer"] == ("repaired_code",)
    assert fields["Fixer"] == fields["Debater"] == ("revised_code",)
    assert fields["Judge"] == ("merged_code",) and fields["Developer"] == ("module_code",)
    assert fields["Engineer"] == ("implementation_code",) and fields["Assistant"] == ("solution_code",)
    assert fields["QaEngineer"] == fields["CodeScorer"] == fields["Critic"] == fields["Reflector"] == ()


def test_bootstrap_on_critic_loop_drops_the_failed_first_drafts(humaneval_problems, make_lm):
    train = humaneval_problems[:3]
    measured = {}
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        compiled = compile_program(
            create_pipeline("critic_loop", max_iterations=2),
            CompileConfig("bootstrap", {"max_bootstrapped_demos": 3}), train=train,
            task_lm=make_lm(fake.api_base), progress=lambda name, value: measured.__setitem__(name, value),
        )
    assert compiled.coder.demos == [] and measured["demos_dropped.coder"] >= 1
    assert compiled.fixer.demos and measured["demos_dropped.fixer"] == 0
    assert all(_passes(train, d, "revised_code") for d in compiled.fixer.demos)
    # The critic writes no code: its demos stay, reviews of the failing drafts included.
    assert len(compiled.critic.demos) == 2 and "demos_dropped.critic" not in measured


def test_bootstrap_on_tree_search_keeps_only_repairs_that_pass(humaneval_problems, make_lm):
    train = humaneval_problems[:4]
    measured = {}
    flaky = {p.task_id for p in train[:2]}
    with FakeOpenAIServer(_flaky_repairs(humaneval_problems, flaky)) as fake:
        compiled = compile_program(
            TreeSearch(TreeSearchParams(**SEARCH)), CompileConfig("bootstrap", {"max_bootstrapped_demos": 4}),
            train=train,
            task_lm=make_lm(fake.api_base), progress=lambda name, value: measured.__setitem__(name, value),
        )
    demos = {name: [dict(d) for d in p.demos] for name, p in compiled.named_predictors()}
    assert demos["repairer"] and all(_passes(train, d, "repaired_code") for d in demos["repairer"])
    assert measured["demos_dropped.repairer"] >= 1  # a failed sibling repair was picked, and dropped
    assert demos["coder"] == [] and measured["demos_dropped.coder"] == len(train)
    # Roles without code output keep their demo of every passing run.
    assert len(demos["scorer"]) == len(demos["path_reflector"]) == len(train)
    assert "demos_dropped.scorer" not in measured


def _fix(problem, code, task_id=None):
    return RoleTrace(
        role="fixer", task_id=task_id or problem.task_id, run_id="r", thread_id="t", message_id=code[-20:],
        inputs={"prompt": problem.prompt, "code": problem.prompt + "    pass\n", "review": "fix it"},
        outputs={"revised_code": code}, task_passed=True,  # an intermediate fix: labelled by the task
    )


def test_trace_demos_skip_failing_fixes_before_drawing(humaneval_problems):
    train, other = humaneval_problems[:2], humaneval_problems[5]
    good = train[0].prompt + train[0].canonical_solution
    traces = [
        _fix(train[0], train[0].prompt + "    return None\n"), _fix(train[1], train[1].prompt + "    pass\n"),
        _fix(train[0], good), _fix(other, other.prompt + other.canonical_solution),  # not a train task
    ]
    measured = {}
    compiled = compile_program(
        create_pipeline("critic_loop"), CompileConfig("traces", {"k": 1}), train=train, traces=traces,
        progress=lambda name, value: measured.__setitem__(name, value),
    )
    assert [d["revised_code"] for d in compiled.fixer.demos] == [good]
    assert measured["demos_dropped.fixer"] == 3 and measured["demos_dropped.coder"] == 0


def test_optimize_logs_the_dropped_demos_on_the_compile_run(tmp_path, home, humaneval_problems):
    spec = {
        "name": "opt-filter", "pipeline": {"name": "tree_search", "params": SEARCH},
        "optimizer": {"name": "bootstrap", "params": {"max_bootstrapped_demos": 2}, "roles": ["repairer"]},
        "split": {"seed": 1, "train": 3, "val": 1}, "dataset": {"source": "humaneval", "limit": 5},
        "model": {"id": "openai/fake", "num_retries": 0},
    }
    every_problem = {p.task_id for p in humaneval_problems}
    with FakeOpenAIServer(_flaky_repairs(humaneval_problems, every_problem)) as fake:
        spec["model"]["api_base"] = fake.api_base
        (tmp_path / "opt.yaml").write_text(yaml.safe_dump(spec))
        result = optimize(tmp_path / "opt.yaml", home=home)
    compile_run = result.steps["compile"]
    logged = MlflowClient(f"sqlite:///{home / 'mlflow.db'}").get_run(compile_run["run_id"]).data.metrics
    assert logged["demos_dropped.repairer"] == compile_run["demos_dropped.repairer"] >= 1
    # Only the chosen role is judged: the coder's failing drafts were never its demos to drop.
    assert not any(name.startswith("demos_dropped.") and name != "demos_dropped.repairer" for name in logged)


def test_a_helper_module_is_not_judged_alone_but_a_bare_body_is(humaneval_problems):
    """An architect developer's module without the entry point cannot pass the hidden tests
    alone, so it stays; a reply that is only a body is completed with the stub and judged."""
    problem = humaneval_problems[0]
    demo_filter = CodeDemoFilter([problem])
    helper = dspy.Example(prompt=problem.prompt, module_code="def distance(a, b):\n    return abs(a - b)\n")
    wrong_body = dspy.Example(prompt=problem.prompt, module_code="    return None\n")
    assert demo_filter.keep("developer", helper, Developer)
    assert not demo_filter.keep("developer", wrong_body, Developer)
    assert demo_filter.dropped["developer"] == 1


# vote as experiments/visible_selection.yaml's greedy_filter10, with fewer samples.
GREEDY_FILTER = {"k": 3, "temperature": 0.8, "select": "visible_filter", "greedy_first": True,
                 "parallel_agents": 1}
BY_THE_TEACHER = "    # written by the teacher\n"


def _teacher_sampler(problems, greedy_right):
    """The teacher's coder for vote: on the ``greedy_right`` problems the greedy answer is right
    (one call, no sample); on the others the greedy answer and the first samples return None
    (they fail the visible examples, so sampling runs) and the last sample is right. Every run
    passes; the calls that failed are in its trace beside the right one."""
    scripted = ScriptedProblems(problems)

    def coder(text, body):
        sampled = body.get("temperature", 0) > 0
        right = (body.get("seed") == GREEDY_FILTER["k"] - 1 if sampled
                 else scripted.problem_in(text).task_id in greedy_right)
        return {"code": scripted.solution(text) + BY_THE_TEACHER if right else scripted.wrong(text)}

    return role_responder({"coder": coder}, with_body=True)


def test_bootstrap_with_a_teacher_keeps_only_its_code_that_passes(humaneval_problems, make_lm):
    """The vote pipeline's coder (the best selection pipeline's sampler) bootstrapped by a
    teacher on another endpoint: every demo is the teacher's and passes, its failing greedy
    answers and samples are dropped, and the task model is not asked at all."""
    train = humaneval_problems[:4]
    greedy_right = {p.task_id for p in train[:2]}
    measured = {}
    with FakeOpenAIServer(_teacher_sampler(humaneval_problems, greedy_right), pass_body=True) as teacher, \
            FakeOpenAIServer(role_responder({})) as task:
        compiled = compile_program(
            create_pipeline("vote", **GREEDY_FILTER),
            CompileConfig("bootstrap", {"max_bootstrapped_demos": 4}), train=train,
            task_lm=make_lm(task.api_base), teacher_lm=make_lm(teacher.api_base),
            progress=lambda name, value: measured.__setitem__(name, value),
        )
    assert task.completions == 0 and teacher.completions == 2 * 1 + 2 * (1 + GREEDY_FILTER["k"])
    demos = [dict(d) for d in compiled.coder.demos]
    assert demos and all(BY_THE_TEACHER.strip() in d["code"] and _passes(train, d, "code") for d in demos)
    # DSPy picks one coder call of each passing run at random; the failing ones it picked were
    # dropped, and not replaced by the passing sample of the same run (DSPy has picked by then).
    assert measured["demos_dropped.coder"] >= 1 and len(demos) + measured["demos_dropped.coder"] == len(train)


def test_a_teachers_demos_do_not_depend_on_which_sample_came_back_first(humaneval_problems, make_lm):
    """DSPy picks a run's demo by its position among the coder's traced calls: with the samples
    drawn at once and answered in an order of their own, the demos (and the drops) are those of
    drawing them one at a time."""
    train = humaneval_problems[:6]

    def compiled_demos(parallel, jitter_seed=0):
        measured = {}
        # Every answer takes at least 0.05 s so samples drawn together overlap; the jitter makes
        # them come back in an order of their own.
        with FakeOpenAIServer(_teacher_sampler(humaneval_problems, set()), pass_body=True,
                              delay_s=0.05, jitter_s=0.3, jitter_seed=jitter_seed) as teacher, \
                FakeOpenAIServer(role_responder({})) as task:
            compiled = compile_program(
                create_pipeline("vote", **{**GREEDY_FILTER, "parallel_agents": parallel}),
                CompileConfig("bootstrap", {"max_bootstrapped_demos": 6}), train=train,
                task_lm=make_lm(task.api_base), teacher_lm=make_lm(teacher.api_base),
                progress=lambda name, value: measured.__setitem__(name, value),
            )
        return [dict(d) for d in compiled.coder.demos], measured["demos_dropped.coder"]

    one_at_a_time = compiled_demos(1)
    assert one_at_a_time[1] > 0 and one_at_a_time[0]  # the pick matters: some kept, some dropped
    for jitter_seed in range(3):
        assert compiled_demos(3, jitter_seed) == one_at_a_time
