"""decision_outcome entries: the fixer's revision, the critic's approval and the judge's choice,
each paired with its code's result on the visible examples, tagged, and only when checkable."""

from functools import partial

from critiquelab.runtime.memory.decisions import decision_outcomes, decisions_in
from critiquelab.runtime.memory.reflection import VisibleOutcome, visible_outcome
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.review import Finding, Review

PROMPT = 'def add_numbers(a, b):\n    """Add two integer numbers.\n    >>> add_numbers(1, 2)\n' \
         '    3\n    """\n'
WRONG = "def add_numbers(a, b):\n    return a - b\n"
RIGHT = "def add_numbers(a, b):\n    return a + b\n"


def message(intent, content="", *, reply=None, role=None, **metadata):
    if role:
        metadata["trace"] = {"role": role}
    return Message(task_id="T/1", thread_id="th", intent=intent, sender=f"{role or 'x'}@th", content=content,
                   in_reply_to=reply, metadata=metadata)


def critic_loop_thread(fixed_code):
    draft = message(Intent.OUTPUT_COMPLETE, WRONG, role="coder")
    finding = Finding(severity="major", category="bug", description="subtracts instead of adding")
    review = Review(verdict="request_changes", summary="subtracts", findings=[finding])
    critique = message(Intent.CRITIQUE, review.model_dump_json(), reply=draft.id, role="critic",
                       verdict="request_changes", code_message_id=draft.id)
    fix = message(Intent.FIX, fixed_code, reply=critique.id, role="fixer")
    approved = Review(verdict="approve", findings=[], summary="ok").model_dump_json()
    approval = message(Intent.CRITIQUE, approved, reply=fix.id, role="critic", verdict="approve",
                       code_message_id=fix.id)
    return [draft, critique, fix, approval]


def entries(history, check=None):
    check = check or partial(visible_outcome, PROMPT, "add_numbers")
    return decision_outcomes(history, task_id="T/1", run_id="r1", prompt=PROMPT, check=check)


def test_fixer_revision_and_critic_approval_get_their_visible_outcome():
    fixed = entries(critic_loop_thread(RIGHT))
    assert [(e.role, e.type, e.context["decision"], e.context["visible_passed"]) for e in fixed] == [
        ("fixer", "decision_outcome", "revise", True), ("critic", "decision_outcome", "approve", True)]
    assert fixed[0].content == ("On 'Add two integer numbers.': Decision: the fixer revised the code "
                                "after a review (subtracts instead of adding). Outcome: the visible "
                                "examples passed.")
    assert "the approval was rightly given" in fixed[1].content
    assert all(e.tags == ["math"] and e.task_id == "T/1" and e.run_id == "r1" for e in fixed)

    still_wrong = entries(critic_loop_thread("def add_numbers(a, b):\n    return a * b\n"))
    assert [e.context["visible_passed"] for e in still_wrong] == [False, False]
    assert "Outcome: visible examples still failed" in still_wrong[0].content
    assert "the approval was wrongly given" in still_wrong[1].content


def test_published_visible_feedback_is_reused_and_each_code_is_checked_once():
    history = critic_loop_thread(RIGHT)
    history.append(message(Intent.EXECUTION_FEEDBACK, "FAIL add_numbers(1, 2)", reply=history[2].id))
    checked = []

    def check(code):
        checked.append(code)
        return VisibleOutcome("all passed", True)

    found = entries(history, check)
    # The fix's feedback was on the thread (failing); the approval re-uses it, nothing is run.
    assert [e.context["visible_passed"] for e in found] == [False, False] and checked == []
    without_feedback = critic_loop_thread(RIGHT)
    entries(without_feedback, check)
    assert checked == [RIGHT]


def test_judge_choice_is_a_decision_and_a_fallback_is_not():
    chosen = message(Intent.VERDICT, RIGHT, role="judge", decision="chosen", choice=2,
                     rationale="solution 2 adds")
    fallback = message(Intent.VERDICT, RIGHT, role="judge", decision="fallback", choice=None)
    voted = message(Intent.VERDICT, RIGHT, chosen=0)  # vote's verdict: no role chose it
    [entry] = entries([chosen, fallback, voted])
    assert (entry.role, entry.context["decision"]) == ("judge", "choose")
    assert entry.content == ("On 'Add two integer numbers.': Decision: the judge chose one candidate "
                             "(solution 2 adds). Outcome: the visible examples passed.")


def test_no_entry_when_the_prompt_has_no_runnable_example():
    assert entries(critic_loop_thread(RIGHT), lambda code: VisibleOutcome("no examples", None)) == []


def test_a_self_refinement_is_not_a_decision_on_a_review():
    draft = message(Intent.OUTPUT_COMPLETE, WRONG, role="coder")
    feedback = message(Intent.REFLECTION, "it subtracts", reply=draft.id, role="self_feedback")
    refined = message(Intent.FIX, RIGHT, reply=feedback.id, role="refiner")
    assert decisions_in([draft, feedback, refined]) == []
