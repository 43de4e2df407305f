"""decision_outcome entries of the architect team and the SOP line: the architect's retry /
reassign / abort, the team reviewer's verdicts, the QA engineer's pass / fail and the reviewer
gate's approval — each paired with the visible outcome of the code it led to, none when that code
cannot be checked, and no generated or hidden test text in any entry."""

from functools import partial
from types import SimpleNamespace

from support.leakage import assert_no_hidden_tests

from critiquelab.runtime.memory.decisions import Decision, decision_outcomes, decisions_in
from critiquelab.runtime.memory.reflection import visible_outcome
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.signatures.engineer import CodeArtifact
from critiquelab.signatures.handoff import Handoff
from critiquelab.signatures.qa_engineer import QaReport
from critiquelab.signatures.team_contracts import (
    ArchitectDecision,
    DeveloperOutput,
    ReviewerOutput,
    ReviewFinding,
    Verification,
)

PROMPT = 'def add_numbers(a, b):\n    """Add two integer numbers.\n    >>> add_numbers(1, 2)\n' \
         '    3\n    """\n'
UNCHECKABLE = 'def add_numbers(a, b):\n    """Add two integer numbers."""\n'
WRONG = "def add_numbers(a, b):\n    return a - b\n"
RIGHT = "def add_numbers(a, b):\n    return a + b\n"
# The QA engineer wrote this assert from the prompt; the hidden tests happen to hold it too.
GENERATED = "assert add_numbers(20, 22) == 42"


def message(intent, content="", *, reply=None, role=None, **metadata):
    if role:
        metadata["trace"] = {"role": role, **metadata.pop("trace", {})}
    return Message(task_id="T/1", thread_id="th", intent=intent, sender=f"{role or 'x'}@th", content=content,
                   in_reply_to=reply, metadata=metadata)


def entries(history, prompt=PROMPT):
    return decision_outcomes(history, task_id="T/1", run_id="r1", prompt=prompt,
                             check=partial(visible_outcome, prompt, "add_numbers"))


def rows(decisions: list[Decision]):
    return [(d.role, d.kind, d.reason, d.code) for d in decisions]


# --- the architect team ---------------------------------------------------------------------

def in_root(intent, content="", *, reply, **metadata):
    """A message of the architect's own session (as ``publish_in`` tags it)."""
    return message(intent, content, reply=reply, session="architect", session_kind="orchestrator", **metadata)


def review(verdict, reply, *, finding=""):
    findings = [ReviewFinding(id="F1", severity="major", category="bug", description=finding)]
    output = ReviewerOutput(verdict=verdict, findings=findings if finding else [],
                            summary=f"{verdict} summary",
                            verification=Verification(examples=1, passed=1, report="PASS"))
    return message(Intent.CRITIQUE, output.model_dump_json(), reply=reply, role="team_reviewer",
                   contract="ReviewerOutput", verdict=verdict, session_kind="reviewer")


def architect_thread(*, abort_first=False):
    """A task that fails and is reassigned, an integration the reviewer sends back, a revision
    it approves (or, with ``abort_first``, a run that aborts before integrating anything)."""
    assign = message(Intent.TASK_ASSIGNMENT, PROMPT)
    failed = DeveloperOutput(task_id="T1", status="failed", summary="no usable code", blockers=["no code"])
    thread = [assign, message(Intent.OUTPUT_COMPLETE, failed.model_dump_json(), reply=assign.id,
                              role="developer", contract="DeveloperOutput", session_kind="developer")]
    action = "abort" if abort_first else "reassign"
    decision = ArchitectDecision(task_id="T1", action=action, failed_developer="developer0@th",
                                 next_developer=None if abort_first else "developer1@th", reason="no code")
    thread.append(in_root("decision", decision.model_dump_json(), reply=assign.id,
                          contract="ArchitectDecision", action=action))
    if abort_first:
        return thread
    first = in_root(Intent.OUTPUT_COMPLETE, WRONG, reply=assign.id, iteration=1)
    asked = in_root("review_request", reply=first.id)
    sent_back = review("changes_requested", asked.id, finding="subtracts instead of adding")
    second = in_root(Intent.FIX, RIGHT, reply=assign.id, iteration=2)
    asked_again = in_root("review_request", reply=second.id)
    return [*thread, first, asked, sent_back, second, asked_again, review("approved", asked_again.id)]


def test_architect_decisions_are_paired_with_the_solution_they_led_to():
    history = architect_thread()
    assert rows(decisions_in(history)) == [
        ("architect", "reassign", "task T1: no code", WRONG),  # the integration after the reassignment
        ("team_reviewer", "request_changes", "subtracts instead of adding", RIGHT),  # the revision
        ("team_reviewer", "approve", "approved summary", RIGHT),  # no findings: its summary
    ]
    found = entries(history)
    assert [(e.role, e.context["decision"], e.context["visible_passed"]) for e in found] == [
        ("architect", "reassign", False), ("team_reviewer", "request_changes", True),
        ("team_reviewer", "approve", True)]
    assert found[0].content == ("On 'Add two integer numbers.': Decision: the architect reassigned a "
                                "failed task to another developer (task T1: no code). Outcome: visible "
                                "examples still failed.")
    assert found[2].content.endswith("Outcome: the visible examples passed; the approval was rightly given.")
    assert all(e.type == "decision_outcome" and e.tags == ["math"] and e.run_id == "r1" for e in found)
    assert [e.context["message_id"] for e in found] == [history[2].id, history[5].id, history[8].id]


def test_an_abort_is_judged_by_the_solution_the_run_stopped_with():
    assert decisions_in(architect_thread(abort_first=True)) == []  # nothing integrated: no code
    history = architect_thread()
    assign, first = history[0], history[3]
    decision = ArchitectDecision(task_id="T2", action="abort", failed_developer="developer1@th",
                                 reason="timed out")
    stopped = [*history[:5], in_root("decision", decision.model_dump_json(), reply=assign.id,
                                     contract="ArchitectDecision", action="abort")]
    assert rows(decisions_in(stopped))[-1] == ("architect", "abort", "task T2: timed out", first.content)
    # The review sent the solution back but no revision followed: that verdict led to no code.
    assert [d.kind for d in decisions_in(stopped)] == ["reassign", "abort"]


# --- the SOP line ---------------------------------------------------------------------------

def handoff(stage, artifact, *, reply, role=None, **metadata):
    envelope = Handoff(summary=stage, artifact=artifact, next_action="go")
    return message(Intent.HANDOFF, envelope.model_dump_json(), reply=reply, role=role, stage=stage,
                   **metadata)


def code_handoff(code, reply, version):
    return handoff("code", CodeArtifact(code=code).model_dump_json(), reply=reply, role="engineer",
                   version=version)


def sop_thread():
    """Version 1 fails QA (a generated test), version 2 passes, the reviewer gate approves it."""
    design = handoff("design", "{}", reply=None)
    tests = message(Intent.GENERATED_TESTS, GENERATED, reply=design.id, role="qa_engineer")
    first = code_handoff(WRONG, design.id, 1)
    failing = QaReport(passed=False, tests_run=2,
                       failures=["FAIL: add_numbers(20, 22) returned -2, expected 42"])
    failed = message(Intent.QA_REPORT, failing.model_dump_json(), reply=first.id, passed=False, version=1)
    back = handoff("qa_report", failing.model_dump_json(), reply=failed.id)
    second = code_handoff(RIGHT, back.id, 2)
    passed = message(Intent.QA_REPORT, QaReport(passed=True, tests_run=2).model_dump_json(), reply=second.id,
                     passed=True, version=2)
    release = handoff("release", CodeArtifact(code=RIGHT).model_dump_json(), reply=passed.id)
    approval = message(Intent.STATUS, reply=release.id, role="reviewer", verdict="approve",
                       stop_reason="approved", trace={"outputs": {"summary": "adds both numbers"}})
    return [design, tests, first, failed, back, second, passed, release, approval]


def test_sop_qa_verdicts_and_the_reviewer_gate_are_paired_with_their_code():
    history = sop_thread()
    assert rows(decisions_in(history)) == [
        ("qa_engineer", "qa_fail", "1 failing of 2 tests run", RIGHT),  # the engineer's next version
        ("qa_engineer", "qa_pass", "2 tests run, none failing", RIGHT),  # the version it passed
        ("reviewer", "approve", "adds both numbers", RIGHT),
    ]
    found = entries(history)
    assert [(e.role, e.context["decision"], e.context["visible_passed"]) for e in found] == [
        ("qa_engineer", "qa_fail", True), ("qa_engineer", "qa_pass", True), ("reviewer", "approve", True)]
    assert found[1].content == ("On 'Add two integer numbers.': Decision: the QA engineer passed the code "
                                "(2 tests run, none failing). Outcome: the visible examples passed; the "
                                "pass was rightly given.")


def test_a_qa_pass_on_code_failing_the_visible_examples_was_wrongly_given():
    history = sop_thread()[:7]  # no reviewer gate
    wrong = code_handoff(WRONG, history[4].id, 2)
    history[5:7] = [wrong, message(Intent.QA_REPORT, QaReport(passed=True, tests_run=1).model_dump_json(),
                                   reply=wrong.id, passed=True, version=2)]
    [fail, qa_pass] = entries(history)
    assert (fail.context["visible_passed"], qa_pass.context["visible_passed"]) == (False, False)
    assert qa_pass.content.endswith("visible examples still failed; the pass was wrongly given.")


def test_no_entry_without_a_runnable_visible_example():
    assert decisions_in(architect_thread()) and decisions_in(sop_thread())
    assert entries(architect_thread(), UNCHECKABLE) == []
    assert entries(sop_thread(), UNCHECKABLE) == []


def test_no_generated_or_hidden_test_in_any_entry():
    found = entries(sop_thread()) + entries(architect_thread())
    texts = [e.model_dump_json() for e in found]
    hidden = f"def check(candidate):\n    {GENERATED}\n    assert candidate(-5, 5) == 0\n"
    problem = SimpleNamespace(task_id="T/1", prompt=PROMPT, test=hidden)
    assert assert_no_hidden_tests([problem], [{"messages": [{"content": t}]} for t in texts]) == 3
    # The QA verdict keeps counts only: neither a generated assert nor its failure line.
    assert len(found) == 6 and not any("add_numbers(20, 22)" in t for t in texts)
