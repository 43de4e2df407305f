"""The architect's plan: checks, dependency waves, fallbacks, integration."""

from critiquelab.pipelines.architect.plan import integrate, make_plan
from critiquelab.signatures.team_contracts import DeveloperOutput, TaskAssignment


def _task(task_id, name, *deps, priority="medium"):
    return TaskAssignment(task_id=task_id, function_name=name, description=f"{name} it",
                          dependencies=list(deps), priority=priority)


def test_dependencies_order_tasks_into_waves_high_priority_first():
    plan = make_plan([_task("m", "main", "a", "b"), _task("b", "helper_b", priority="high"),
                      _task("a", "helper_a", priority="low")], "main", max_tasks=3)
    assert [[t.task_id for t in wave] for wave in plan.waves] == [["b", "a"], ["m"]]
    assert plan.notes == []


def test_unknown_and_self_dependencies_are_dropped_and_noted():
    plan = make_plan([_task("m", "main", "ghost", "m")], "main", max_tasks=3)
    assert plan.tasks[0].dependencies == []
    assert plan.notes == ["task m: dropped unknown dependencies ['ghost', 'm']"]


def test_an_unusable_plan_falls_back_to_the_whole_problem():
    cases = {
        "the dependencies form a cycle": [_task("m", "main", "a"), _task("a", "helper", "m")],
        "2 tasks define main, not exactly one": [_task("m", "main"), _task("n", "main")],
        "0 tasks define main, not exactly one": [_task("a", "helper")],
        "4 tasks proposed, more than max_tasks=3": [_task(str(i), f"f{i}") for i in range(3)]
        + [_task("m", "main")],
        "task ids or function names repeat": [_task("m", "main"), _task("m", "other")],
        "a function name is not a Python identifier": [_task("m", "main"), _task("a", "not valid")],
        "the architect proposed no task": [],
    }
    for problem, tasks in cases.items():
        plan = make_plan(tasks, "main", max_tasks=3)
        assert [t.function_name for t in plan.tasks] == ["main"] and len(plan.waves) == 1, problem
        assert plan.notes[-1] == f"{problem}: the problem stays one task"


def test_integration_keeps_each_function_with_its_owner_and_imports_once():
    plan = make_plan([_task("m", "main", "h"), _task("h", "helper")], "main", max_tasks=3)
    outputs = {
        "h": DeveloperOutput(task_id="h", status="completed",
                             code="import math\n\ndef helper(x):\n    return math.sqrt(x)\n"),
        "m": DeveloperOutput(task_id="m", status="completed",
                             code="import math\n\ndef helper(x):\n    return 0\n\n"
                                  "def _aux(y):\n    return y\n\ndef main(x):\n    return _aux(helper(x))\n"),
    }
    code, notes = integrate(plan, outputs)
    namespace = {}
    exec(compile(code, "integrated", "exec"), namespace)
    assert namespace["main"](16) == 4.0  # the helper's owner's version, not main's redefinition
    assert code.count("import math") == 1
    assert notes == ["task m: dropped its own helper, owned by task h"]
