"""When and what memory recalls, through the runner against a scripted LM: with recall on failure
a first attempt is the request of a run without memory and only the retry recalls; verified demos
reach later coders as DSPy demos (the signature's own few-shot turns, the same after `export`),
carry no hidden-test text and are labelled by the visible examples alone; the random control
draws from earlier problems only; bad settings are one line, exit 2."""

import json
import re

import dspy
import pytest
import yaml
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer
from support.leakage import assert_no_hidden_tests
from support.role_responder import ScriptedProblems, role_of, role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.optimizers.export import export_program, load_program
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.memory.bank import MemoryBank
from critiquelab.runtime.memory.demos import as_demo
from critiquelab.signatures.adapter import CodeAdapter
from critiquelab.signatures.coder import Coder

LESSON = "Check the boundary cases named in the docstring before returning."
RETRY = "[this task, attempt"
# Verified demos alone: no lessons, so nothing else is written or recalled.
DEMOS_ONLY = {"enabled": True, "lessons": False, "demos": 2, "reflect": False, "record": []}


def _scripts(problems, *, wrong=(), code=None):
    """The coder solves every problem (``code(problem)`` when given) except those in ``wrong``,
    until a retry shows its reflection."""
    scripted = ScriptedProblems(problems)

    def coder(text):
        problem = scripted.problem_in(text.rsplit("prompt:", 1)[-1])  # the current task, not a demo's
        if problem.task_id in wrong and RETRY not in text:
            return {"code": problem.prompt + "    return None\n"}
        return {"code": code(problem) if code else problem.prompt + problem.canonical_solution}

    def reflector(text):
        return {"what_went_wrong": "it returned None", "what_worked": "reading the examples",
                "pattern": "boundary cases", "lesson": LESSON}

    return {"coder": coder, "reflector": reflector}


def _run(problems, pipeline, scripts, **spec):
    """Run one pipeline entry without the LM cache; its coder requests and the child run."""
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        result = run(fake_spec(fake.api_base, pipelines=[pipeline], limit=len(problems), **spec),
                     progress=False, fresh=True, cache=False)
        coder = [r for r in fake.requests if "messages" in r and role_of(r["messages"]) == "coder"]
    return coder, result.children[0]


def _body(request):
    return json.dumps(request, sort_keys=True)


def test_recall_on_failure_sends_first_attempts_as_without_memory_and_recalls_for_the_retry(
    home, humaneval_problems
):
    problems = humaneval_problems[:3]
    scripts = _scripts(problems, wrong={problems[2].task_id})
    plain, _ = _run(problems, {"name": "reflexion"}, scripts)
    memory = {"enabled": True, "approval": "auto", "recall": "on_failure"}
    recalled, child = _run(problems, {"name": "reflexion", "memory": memory}, scripts)
    # A store of its own: skills are shared by the runs of one store, and this run must start empty.
    always_memory = {**memory, "recall": "always", "store": "recalled_always"}
    always, always_child = _run(problems, {"name": "reflexion", "memory": always_memory}, scripts)
    first = [_body(r) for r in recalled if RETRY not in _body(r)]
    assert len(recalled) == 4 and len(first) == 3  # three first attempts, one retry
    # Byte for byte (in any order: without memory two problems are solved at once).
    assert sorted(first) == sorted(_body(r) for r in plain if RETRY not in _body(r))
    [retry] = [r["messages"][-1]["content"] for r in recalled if RETRY in _body(r)]
    # The retry gets what the two earlier problems left (k = 3 entries), then its own reflection.
    with MemoryBank(home) as bank:
        earlier = {e.id for e in bank.episodic.all() if e.run_id == child.run_id
                   and e.task_id in {problems[0].task_id, problems[1].task_id}}
    shown = re.findall(r"\[(m-[0-9a-f]{12})\] ", retry)
    assert len(shown) == 3 and set(shown) <= earlier and f"boundary cases: {LESSON}" in retry
    assert retry.endswith(f"{RETRY} 1] it returned None {LESSON}")
    assert child.metrics["memory.injected_first_attempts"] == 0
    assert child.metrics["memory.injected_calls"] == 1 and child.metrics["memory.role_calls"] == 4
    # Recalled always, the later first attempts carry lessons: what on_failure takes away.
    assert always_child.metrics["memory.injected_first_attempts"] == 2
    assert sum("[m-" in r["messages"][-1]["content"] for r in always if RETRY not in _body(r)) == 2
    assert_no_hidden_tests(problems, recalled + always)


def test_verified_demos_are_dspy_demos_of_the_coder_and_round_trip_through_export(
    home, humaneval_problems, tmp_path
):
    problems = humaneval_problems[:2]
    scripts = _scripts(problems)
    plain, _ = _run(problems, {"name": "baseline"}, scripts)
    plain.sort(key=lambda r: problems[1].prompt.strip() in r["messages"][-1]["content"])  # either came first
    with_demos, child = _run(problems, {"name": "baseline", "memory": DEMOS_ONLY}, scripts)
    assert _body(with_demos[0]) == _body(plain[0])  # nothing solved yet: the plain request
    with MemoryBank(home) as bank:
        entry, later = bank.episodic.all()  # both problems were solved: a demo each
    assert [(e.type, e.task_id) for e in (entry, later)] == [("demo", p.task_id) for p in problems]
    demo = as_demo(Coder, entry)
    # The second request is DSPy's few-shot format: the demo as a user/assistant turn before the task.
    expected = CodeAdapter().format(Coder, demos=[demo], inputs={"prompt": problems[1].prompt})
    assert with_demos[1]["messages"] == expected
    assert [m["role"] for m in expected] == ["system", "user", "assistant", "user"]
    assert expected[0] == plain[1]["messages"][0] and expected[-1] == plain[1]["messages"][-1]
    assert child.metrics["memory.demo_calls"] == 1 and child.metrics["memory.injected_first_attempts"] == 1
    log = MlflowClient(tracking_uri(home)).download_artifacts(child.run_id, "messages.jsonl")
    with open(log) as lines:
        traces = [json.loads(line)["metadata"]["trace"] for line in lines
                  if json.loads(line)["intent"] == "output.complete"]
    assert [t.get("memory_ids", []) for t in traces] == [[], [entry.id]]

    # The same demo as the program's own: exported and loaded back, it sends the same request.
    program = create_pipeline("baseline")
    program.coder.demos = [dspy.Example(**demo)]
    export_program(program, tmp_path / "out", pipeline="baseline")
    assert entry.context["code"] in (tmp_path / "out" / "prompts.md").read_text()
    loaded, _ = load_program(tmp_path / "out")
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        lm = dspy.LM("openai/fake", api_base=fake.api_base, api_key="fake", cache=False, num_retries=0)
        with dspy.context(lm=lm, adapter=CodeAdapter()):
            target = problems[1]
            loaded(prompt=target.prompt, entry_point=target.entry_point, task_id=target.task_id)
        [exported] = fake.requests
    assert exported["messages"] == with_demos[1]["messages"]


def test_demos_are_labelled_by_visible_examples_only_and_never_show_a_hidden_test(home, humaneval_problems):
    """The first answer passes the prompt's examples but not the hidden tests (it hard-codes the
    examples) and carries the hidden test's text besides: it still becomes a demo — only visible
    outcomes label — and the demo holds the function alone. The second fails an example: no demo."""
    problems = humaneval_problems[:3]
    first = problems[0]
    assert first.entry_point == "has_close_elements"
    hard_coded = first.prompt + "    return numbers == [1.0, 2.8, 3.0, 4.0, 5.0, 2.0]\n\n" + first.test

    def code(problem):
        return hard_coded if problem is first else problem.prompt + problem.canonical_solution

    scripts = _scripts(problems, wrong={problems[1].task_id}, code=code)
    requests, child = _run(problems, {"name": "baseline", "memory": DEMOS_ONLY}, scripts)
    assert [r.passed for r in child.results] == [False, False, True]
    with MemoryBank(home) as bank:
        demos = bank.episodic.all()
    assert [d.task_id for d in demos] == [first.task_id, problems[2].task_id]
    assert demos[0].context["code"] == "from typing import List\n\n" \
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n" \
        "    return numbers == [1.0, 2.8, 3.0, 4.0, 5.0, 2.0]"
    last = requests[-1]["messages"]
    assert len(last) == 4 and last[2]["content"] == f"```python\n{demos[0].context['code']}\n```"
    assert assert_no_hidden_tests(problems, requests) > 0
    for demo in demos:
        assert not any(line.strip() in demo.model_dump_json() for p in problems
                       for line in p.test.splitlines() if len(line.strip()) >= 12)


def test_random_demos_come_from_problems_earlier_in_the_run_order(home, humaneval_problems):
    problems = humaneval_problems[:5]
    memory = {**DEMOS_ONLY, "demo_selection": "random"}
    requests, child = _run(problems, {"name": "baseline", "memory": memory}, _scripts(problems),
                           order_seed=3)
    order = [r.task_id for r in child.results]
    assert order != sorted(order)  # shuffled, so "earlier" is the run's order, not the dataset's
    prompts = {p.task_id: p.prompt for p in problems}
    for position, request in enumerate(requests):
        shown = {m["content"] for m in request["messages"][1:-1] if m["role"] == "user"}
        earlier = {f"prompt:\n```python\n{prompts[t].strip(chr(10))}\n```" for t in order[:position]}
        assert shown <= earlier and len(shown) == min(position, 2)


@pytest.mark.parametrize(("memory", "expected"), [
    ({"recall": "sometimes"},
     "pipelines.0.memory.recall: must be one of always, on_failure (got 'sometimes')"),
    ({"demos": 9}, "pipelines.0.memory.demos: must be <= 8 (got 9)"),
    ({"max_distance": 0}, "pipelines.0.memory.max_distance: must be > 0.0 (got 0)"),
    ({"lessons": False}, "pipelines.0.memory: lessons: false with demos: 0 would inject nothing"),
    ({"lessons": False, "demos": 1, "max_distance": 0.8}, "max_distance gates the lessons"),
    ({"demo_selection": "random"}, "demo_selection and demos_max_distance apply to demos; set demos >= 1"),
])
def test_bad_recall_settings_are_one_line_and_exit_2_before_anything_is_written(
    tmp_path, capsys, home, memory, expected
):
    spec = tmp_path / "spec.yaml"
    pipeline = {"name": "baseline", "memory": {"enabled": True, **memory}}
    spec.write_text(yaml.safe_dump({"name": "x", "dataset": {"limit": 1}, "pipelines": [pipeline]}))
    code = main(["--home", str(home), "run", str(spec)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err
    assert not home.exists()
