"""When and what memory recalls for one role call: recall on failure (a first attempt gets
nothing, a repair of code failing a visible example does), the relevance gate, and verified demos
(nearest, or the random control drawn from earlier tasks only)."""

import pytest

from critiquelab.runtime.memory.bank import MemoryBank
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.memory.demos import as_demo, verified_demo
from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.injection import RunMemory, TaskMemory
from critiquelab.runtime.memory.reflection import VisibleOutcome
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.fixer import Fixer
from critiquelab.signatures.memory import with_memories

PASSED = VisibleOutcome("PASS", True)
AUTO = MemoryConfig(enabled=True, approval="auto")  # a coder's lesson reaches the fixer at once


@pytest.fixture
def bank(tmp_path, minilm):
    with MemoryBank(tmp_path, collection="mem", embedder=minilm) as opened:
        yield opened


def lesson(content, task_id="T/1"):
    return MemoryEntry(role="coder", type="reflection", task_id=task_id, run_id="r1", content=content)


def demo_of(problem, run_id="r1"):
    return verified_demo(role="coder", task_id=problem.task_id, run_id=run_id, prompt=problem.prompt,
                         entry_point=problem.entry_point, code=problem.prompt + problem.canonical_solution,
                         outcome=PASSED)


def task_memory(bank, problem, **config):
    config = MemoryConfig(enabled=True, approval="auto", **config)
    return TaskMemory(RunMemory(bank, config, "r1"), problem.task_id, problem.prompt, problem.entry_point)


def test_recall_on_failure_gives_nothing_to_a_first_attempt_and_recalls_for_a_failing_repair(
    bank, humaneval_problems
):
    problem = humaneval_problems[0]
    bank.write(lesson("Compare every pair of numbers, not only neighbours."), AUTO)
    task = task_memory(bank, problem, recall="on_failure")
    fixer, coder = with_memories(Fixer), with_memories(Coder)
    wrong = problem.prompt + "    return None\n"
    right = problem.prompt + problem.canonical_solution
    assert task.recall_call(coder, "coder", {"prompt": problem.prompt}, None).memories is None
    assert task.recall_call(fixer, "fixer", {"prompt": problem.prompt, "code": right}, None).memories is None
    repair = task.recall_call(fixer, "fixer", {"prompt": problem.prompt, "code": wrong}, None)
    assert "Compare every pair of numbers" in repair.memories and len(repair.ids) == 1
    retry = task.recall_call(coder, "coder", {"prompt": problem.prompt}, True)  # the caller says so
    assert retry.ids == repair.ids
    assert [i.first_attempt for i in task.injections] == [True, True, False, False]
    assert [bool(i.ids) for i in task.injections] == [False, False, True, True]
    always = task_memory(bank, problem)  # the default recalls for the first attempt too
    assert always.recall_call(coder, "coder", {"prompt": problem.prompt}, None).ids == repair.ids
    assert always.injections[0].first_attempt


def test_an_entry_farther_than_max_distance_is_not_injected(bank, humaneval_problems):
    problem = humaneval_problems[0]  # has_close_elements: are two numbers closer than a threshold?
    near = bank.write(lesson("Check whether any two numbers in the list are closer than the threshold."),
                      AUTO).entry
    far = bank.write(lesson("Reverse the string with slicing before printing it.", "T/2"), AUTO).entry
    distances = {r.entry.id: r.distance for r in bank.episodic.recall(problem.prompt, k=2, touch=False)}
    assert distances[near.id] < 0.6 < distances[far.id]  # what the gate below separates
    gated = task_memory(bank, problem, max_distance=0.6)
    recall = gated.recall_call(with_memories(Coder), "coder", {"prompt": problem.prompt}, None)
    assert recall.ids == (near.id,) and "Reverse the string" not in recall.memories
    open_gate = task_memory(bank, problem)
    assert set(open_gate.recall_call(with_memories(Coder), "coder", {"prompt": problem.prompt}, None).ids) \
        == {near.id, far.id}


def test_nearest_demos_are_the_closest_earlier_tasks_within_the_gate(bank, humaneval_problems):
    by_id = {p.task_id: p for p in humaneval_problems}
    # HumanEval/10 (make_palindrome) is the nearest of these to HumanEval/48 (is_palindrome).
    for task_id in ("HumanEval/0", "HumanEval/10", "HumanEval/22", "HumanEval/48"):
        bank.episodic.add(demo_of(by_id[task_id]))
    task = task_memory(bank, by_id["HumanEval/48"], lessons=False, demos=2, demos_max_distance=0.45)
    recall = task.recall_call(Coder, "coder", {"prompt": by_id["HumanEval/48"].prompt}, None)
    [demo] = recall.demos  # its own demo (a resumed task) is never shown; the others are too far
    assert demo["prompt"] == by_id["HumanEval/10"].prompt and set(demo) == {"prompt", "code"}
    assert "def make_palindrome" in demo["code"] and '"""' not in demo["code"]
    assert recall.memories == "none" and task.injections[0].demo_ids == list(recall.ids)


def test_random_demos_come_from_earlier_tasks_only_and_as_many_as_nearest_gives(bank, humaneval_problems):
    problems = humaneval_problems[:6]
    current = problems[5]
    for problem in problems:
        bank.episodic.add(demo_of(problem))
    bank.episodic.add(demo_of(humaneval_problems[7], run_id="another-run"))  # scope run: not this run's
    earlier = {p.prompt for p in problems[:5]}
    drawn = set()
    for role in ("coder", "fixer", "debater", "judge", "critic", "planner"):
        task = task_memory(bank, current, lessons=False, demos=3, demo_selection="random")
        recall = task.recall_call(Coder, role, {"prompt": current.prompt}, None)
        assert len(recall.demos) == 3 and {d["prompt"] for d in recall.demos} <= earlier
        again = task_memory(bank, current, lessons=False, demos=3, demo_selection="random")
        assert again.recall_call(Coder, role, {"prompt": current.prompt}, None).demos == recall.demos
        drawn |= {d["prompt"] for d in recall.demos}
    assert len(drawn) > 3  # drawn at random, not the nearest three every time
    gated = task_memory(bank, current, lessons=False, demos=3, demo_selection="random",
                        demos_max_distance=0.01)
    assert gated.recall_call(Coder, "coder", {"prompt": current.prompt}, None).demos == ()


def test_a_demo_needs_every_visible_example_passed_and_fits_each_code_role(humaneval_problems):
    problem = humaneval_problems[0]
    code = problem.prompt + problem.canonical_solution
    args = {"role": "coder", "task_id": problem.task_id, "run_id": "r1", "prompt": problem.prompt,
            "entry_point": problem.entry_point, "code": code}
    assert verified_demo(**args, outcome=VisibleOutcome("FAIL", False)) is None
    assert verified_demo(**args, outcome=VisibleOutcome("no runnable examples", None)) is None
    demo = verified_demo(**args, outcome=PASSED)
    assert demo.type == "demo" and demo.content == problem.prompt and demo.context["visible_passed"]
    assert as_demo(with_memories(Coder), demo) == {"prompt": problem.prompt, "code": demo.context["code"],
                                                   "memories": "none"}
    assert as_demo(Fixer, demo) == {"prompt": problem.prompt, "revised_code": demo.context["code"]}
