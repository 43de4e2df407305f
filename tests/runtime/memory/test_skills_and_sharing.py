"""Skills (promotion, confidence, approval gate for injection) and proposals between roles."""

import pytest

from critiquelab.core.errors import UserError
from critiquelab.runtime.memory.bank import MemoryBank
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.memory.entries import MemoryEntry
from critiquelab.runtime.memory.injection import RunMemory, TaskMemory
from critiquelab.runtime.memory.skills import Skill
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.memory import with_memories

SIMILAR = [
    "Handle the empty list before indexing its first element.",
    "Check for an empty list before reading the first element.",
    "Guard against an empty input list before indexing element zero.",
]


@pytest.fixture
def bank(tmp_path, minilm):
    with MemoryBank(tmp_path, collection="mem", embedder=minilm) as opened:
        yield opened


def lesson(content, task, role="coder", type="reflection"):
    return MemoryEntry(role=role, type=type, task_id=task, run_id="r1", content=content)


def test_a_pattern_seen_on_enough_tasks_becomes_an_unapproved_skill(bank):
    config = MemoryConfig(enabled=True, promote_after=3)
    first = bank.write(lesson(SIMILAR[0], "T/1"), config)
    second = bank.write(lesson(SIMILAR[1], "T/2"), config)
    unrelated = bank.write(lesson("Use integer division for counts of pairs.", "T/4"), config)
    assert first.skill is second.skill is unrelated.skill is None
    third = bank.write(lesson(SIMILAR[2], "T/3"), config)
    skill = third.skill
    assert skill is not None and not skill.approved
    assert (skill.role, skill.category) == ("coder", "reflection")
    assert skill.source_task_ids == ["T/1", "T/2", "T/3"]
    # The same pattern again does not make a second skill.
    assert bank.write(lesson(SIMILAR[0] + " Always.", "T/5"), config).skill is None
    assert [s.id for s in bank.skills.list()] == [skill.id]


def test_same_task_entries_do_not_promote(bank):
    config = MemoryConfig(enabled=True, promote_after=2)
    bank.write(lesson(SIMILAR[0], "T/1"), config)
    assert bank.write(lesson(SIMILAR[1], "T/1"), config).skill is None


def test_confidence_follows_visible_outcomes(bank):
    config = MemoryConfig(enabled=True, promote_after=2)
    bank.write(lesson(SIMILAR[0], "T/1"), config)
    skill = bank.write(lesson(SIMILAR[1], "T/2"), config).skill
    assert skill.confidence == 0.5
    bank.skills.record_use([skill.id], succeeded=True, run_id="r1", task_id="T/3")
    bank.skills.record_use([skill.id], succeeded=True, run_id="r1", task_id="T/4")
    bank.skills.record_use([skill.id], succeeded=False, run_id="r1", task_id="T/5")
    bank.skills.record_use([skill.id], succeeded=False, run_id="r1", task_id="T/5")  # counted once
    updated = bank.skills.get(skill.id)
    assert (updated.times_used, updated.times_succeeded) == (3, 2)
    assert updated.confidence == pytest.approx(3 / 5)


def test_forgetting_an_attempt_takes_back_its_entries_proposals_skill_and_uses(bank):
    config = MemoryConfig(enabled=True, promote_after=2, share_to={"coder": ["fixer"]})
    first = bank.write(lesson(SIMILAR[0], "T/1"), config).entry
    second = bank.write(lesson(SIMILAR[1], "T/2"), config)
    used = second.skill
    bank.skills.record_use([used.id], succeeded=True, run_id="r1", task_id="T/3")
    # The attempt at T/3 that is taken back: an entry, its proposal, a skill it promoted, a use.
    attempt = bank.write(lesson("Use integer division for counts of pairs.", "T/3"), config).entry
    bank.skills.add(Skill(name="pairs", description="pairs", role="coder", category="reflection",
                          template="pairs", source_task_ids=["T/3"], source_entry_ids=[attempt.id]))
    assert len(bank.skills.list()) == 2 and len(bank.proposals.list()) == 3
    other_run = lesson(SIMILAR[2], "T/3")
    other_run.run_id = "r2"
    bank.episodic.add(other_run)

    assert bank.forget_attempt("r1", "T/3") == 1
    assert {e.id for e in bank.episodic.all()} == {first.id, second.entry.id, other_run.id}
    assert sorted(p.entry_id for p in bank.proposals.list()) == sorted([first.id, second.entry.id])
    assert [s.id for s in bank.skills.list()] == [used.id]
    assert (bank.skills.get(used.id).times_used, bank.skills.get(used.id).confidence) == (0, 0.5)
    assert bank.forget_attempt("r1", "T/3") == 0  # nothing left to take back


def test_only_approved_skills_are_injected_unless_approval_is_auto(bank):
    manual = MemoryConfig(enabled=True, promote_after=2)
    bank.write(lesson(SIMILAR[0], "T/1"), manual)
    skill = bank.write(lesson(SIMILAR[1], "T/2"), manual).skill

    def injected(config):
        task = TaskMemory(RunMemory(bank, config, "r1"), "T/9", "def f(xs): ...")
        recall = task.recall_call(with_memories(Coder), "coder", {"prompt": "empty list"}, None)
        return recall.memories, list(recall.ids)

    text, ids = injected(manual)
    assert skill.id not in ids and skill.id not in text
    _, ids = injected(MemoryConfig(enabled=True, approval="auto"))
    assert skill.id in ids
    bank.decide(skill.id, approve=True)
    text, ids = injected(manual)
    assert skill.id in ids and f"[{skill.id}] {skill.template}" in text
    bank.decide(skill.id, approve=False)
    assert bank.skills.list() == []


def test_proposals_share_an_entry_with_the_roles_that_benefit_once_approved(bank):
    config = MemoryConfig(enabled=True, share_to={"critic": ["coder", "fixer"]})
    finding = lesson("Reviewers found: the loop skips the last element.", "T/1", role="critic",
                     type="review_feedback")
    written = bank.write(finding, config)
    assert sorted(p.to_role for p in written.proposals) == ["coder", "fixer"]
    assert {p.status for p in bank.proposals.list()} == {"pending"}

    def recalled_by(role):
        return [r.entry.id for r in bank.episodic.recall("last element", audience=role, touch=False)]

    assert recalled_by("critic") == [finding.id] and recalled_by("coder") == []
    to_coder = next(p for p in written.proposals if p.to_role == "coder")
    to_fixer = next(p for p in written.proposals if p.to_role == "fixer")
    assert bank.decide(to_coder.id, approve=True).status == "approved"
    assert bank.decide(to_fixer.id, approve=False).status == "rejected"
    assert recalled_by("coder") == [finding.id] and recalled_by("fixer") == []
    assert bank.proposals.list() == []  # nothing pending


def test_auto_approval_shares_at_once(bank):
    config = MemoryConfig(enabled=True, approval="auto", share_to={"critic": ["coder"]})
    finding = bank.write(lesson("Reviewers found: off by one.", "T/1", role="critic"), config).entry
    assert [r.entry.id for r in bank.episodic.recall("off by one", audience="coder")] == [finding.id]


def test_unknown_ids_are_one_line_errors(bank):
    for bad, message in (("x-1", "neither a proposal id"), ("p-missing", "no proposal 'p-missing'"),
                         ("s-missing", "no skill 's-missing'")):
        with pytest.raises(UserError, match=message):
            bank.decide(bad, approve=True)


def test_a_skill_another_run_promoted_reaches_a_run_only_with_scope_all(bank):
    """Skills live in the store; with scope run a run (one ordering, one pipeline) receives only
    those promoted from its own entries, so orderings sharing a store stay independent."""
    auto = MemoryConfig(enabled=True, approval="auto", promote_after=2)
    bank.write(lesson(SIMILAR[0], "T/1"), auto, run_ids=["r1"])
    skill = bank.write(lesson(SIMILAR[1], "T/2"), auto, run_ids=["r1"]).skill
    assert skill is not None

    def injected(run_id, **config):
        task = TaskMemory(RunMemory(bank, MemoryConfig(enabled=True, approval="auto", **config), run_id),
                          "T/9", "def f(xs): ...")
        return task.recall_call(with_memories(Coder), "coder", {"prompt": "empty list"}, None).ids

    assert skill.id in injected("r1")
    assert skill.id not in injected("r2")
    assert skill.id in injected("r2", scope="all")
