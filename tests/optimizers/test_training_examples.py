"""Trace collection: a real (scripted) critic-loop run → labelled per-role examples."""

from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, review, role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.optimizers.training_examples import (
    TaskOutcome,
    assert_no_hidden_tests,
    by_role,
    collect_from_home,
    label_thread,
)
from critiquelab.runtime.pool.messages import Message

GULLIBLE = "HumanEval/1"  # the critic approves this task's wrong first draft


def _scripts(problems):
    scripted = ScriptedProblems(problems)

    def coder(text):
        return {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"}

    def critic(text):
        code = text.rsplit("[[ ## code ## ]]", 1)[-1]
        if "first draft" in code and GULLIBLE not in text and scripted.problem_in(text).task_id != GULLIBLE:
            return review("request_changes", "a placeholder")
        return review("approve")

    def fixer(text):
        return {"revised_code": scripted.solution(text)}

    return {"coder": coder, "critic": critic, "fixer": fixer}


def test_collects_labelled_role_examples_from_a_finished_run(home, humaneval_problems):
    with FakeOpenAIServer(role_responder(_scripts(humaneval_problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=[{"name": "critic_loop"}], limit=3), progress=False)
    child = result.children[0]
    traces = collect_from_home(home, run_ids=[child.run_id])
    per_task = {}
    for t in traces:
        per_task.setdefault(t.task_id, []).append(t)
    assert set(per_task) == {"HumanEval/0", "HumanEval/1", "HumanEval/2"}

    good = [t for t in per_task["HumanEval/0"]]
    assert [t.role for t in good] == ["coder", "critic", "fixer", "critic"]
    coder, first_review, fixer, second_review = good
    assert coder.task_passed is True and coder.output_passed is False and not coder.success
    assert first_review.verdict_right is True  # rejected a failing draft
    assert fixer.output_passed is True and fixer.success
    assert second_review.verdict_right is True  # approved the passing fix
    assert coder.inputs == {"prompt": humaneval_problems[0].prompt}
    assert "first draft" in coder.outputs["code"]
    assert first_review.outputs["verdict"] == "request_changes"

    gullible = per_task[GULLIBLE]
    assert [t.role for t in gullible] == ["coder", "critic"]
    assert gullible[0].task_passed is False
    assert gullible[1].verdict_right is False  # approved code that fails the hidden tests

    examples = by_role(traces)
    assert set(examples) == {"coder", "critic", "fixer"}
    critics = [t for t in traces if t.role == "critic"]
    assert len(examples["critic"]) == len(critics)
    # Problems finish in either order (two at once), so HumanEval/0's first review is found by identity.
    critic_example = examples["critic"][next(i for i, t in enumerate(critics) if t is first_review)]
    assert set(critic_example.inputs().keys()) == {"prompt", "code", "execution_feedback"}
    assert critic_example.verdict_right is True
    assert_no_hidden_tests([e for group in examples.values() for e in group], humaneval_problems[:3])

    only_train = collect_from_home(home, run_ids=[child.run_id], task_ids=["HumanEval/2"], roles=["fixer"])
    assert [(t.task_id, t.role) for t in only_train] == [("HumanEval/2", "fixer")]


def _msg(intent, content="", **metadata):
    return Message(task_id="T", thread_id="th", intent=intent, sender="x", content=content,
                   run_id="r", metadata=metadata)


def _trace(role, inputs, outputs):
    return {"role": role, "inputs": inputs, "outputs": outputs, "parsed": True}


def test_intermediate_versions_are_unknown_unless_scored():
    v1 = _msg("output.complete", "v1", trace=_trace("coder", {"prompt": "p"}, {"code": "v1"}))
    r1 = _msg("critique", trace=_trace("critic", {"code": "v1"}, {"verdict": "request_changes"}),
              verdict="request_changes", code_message_id=v1.id)
    v2 = _msg("fix", "v2", trace=_trace("fixer", {"code": "v1"}, {"revised_code": "v2"}))
    r2 = _msg("critique", trace=_trace("critic", {"code": "v2"}, {"verdict": "approve"}),
              verdict="approve", code_message_id=v2.id)
    v3 = _msg("fix", "v3", trace=_trace("fixer", {"code": "v2"}, {"revised_code": "v3"}))
    bad = _msg("critique", trace={"role": "critic", "inputs": {}, "outputs": {}, "parsed": False},
               verdict="unparsed", code_message_id=v3.id)
    history = [v1, r1, v2, r2, v3, bad]
    traces = label_thread(history, TaskOutcome(passed=True, first_passed=False))
    assert [t.role for t in traces] == ["coder", "critic", "fixer", "critic", "fixer"]  # unparsed skipped
    assert traces[1].verdict_right is True
    assert traces[2].output_passed is None and traces[3].verdict_right is None  # v2 never scored
    assert traces[4].output_passed is True

    scored = label_thread(history, TaskOutcome(passed=True, first_passed=False),
                          scorer=lambda task, code: code == "v3")
    assert scored[2].output_passed is False and scored[3].verdict_right is False  # approved failing v2
