"""Skills reach a role call nearest to the task first, most confident among equally near ones,
never beyond the distance threshold."""

import pytest

from critiquelab.runtime.memory.bank import MemoryBank
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.memory.injection import RunMemory, TaskMemory
from critiquelab.runtime.memory.skill_ranking import SkillRanker
from critiquelab.runtime.memory.skills import Skill
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.memory import with_memories

TASK = "Return the first element of a list, or None when the list is empty."


def skill(template, confidence=0.5, role="coder"):
    return Skill(name=template[:20], description=template, role=role, category="reflection",
                 template=template, confidence=confidence, approved=True)


class AxisEmbedder:
    """Texts to fixed 2-d vectors: distances chosen by the test, and a count of embedded texts."""

    def __init__(self, vectors):
        self.vectors = vectors
        self.embedded = []

    def __call__(self, texts):
        self.embedded += texts
        return [self.vectors[t] for t in texts]


def test_nearer_band_wins_over_confidence_and_confidence_breaks_a_band_tie():
    # Distances to the query (1, 0): near 0.0, near_too ~0.001 (same band), far ~0.29, opposite 2.0.
    embed = AxisEmbedder({"q": [1.0, 0.0], "near": [1.0, 0.0], "near_too": [1.0, 0.05],
                          "far": [1.0, 1.0], "opposite": [-1.0, 0.0]})
    near, near_too = skill("near", confidence=0.4), skill("near_too", confidence=0.9)
    far, opposite = skill("far", confidence=0.99), skill("opposite", confidence=1.0)
    ranked = SkillRanker(embed).rank("q", [far, opposite, near, near_too], max_distance=1.0, k=5)
    assert [r.skill.template for r in ranked] == ["near_too", "near", "far"]
    assert ranked[0].distance == pytest.approx(1 - 1 / (1 + 0.05**2) ** 0.5)
    assert [r.skill.template for r in SkillRanker(embed).rank("q", [far, near], max_distance=0.2, k=5)] \
        == ["near"]


def test_template_vectors_are_embedded_once_per_ranker():
    embed = AxisEmbedder({"q": [1.0, 0.0], "a": [1.0, 0.0], "b": [0.0, 1.0]})
    ranker = SkillRanker(embed)
    skills = [skill("a"), skill("b")]
    ranker.rank("q", skills, max_distance=2.0, k=2)
    ranker.rank("q", skills, max_distance=2.0, k=1)
    assert sorted(embed.embedded) == ["a", "b", "q", "q"]


@pytest.fixture
def bank(tmp_path, minilm):
    with MemoryBank(tmp_path, collection="mem", embedder=minilm) as opened:
        yield opened


def test_injected_skills_are_the_ones_about_a_similar_task(bank):
    """With MiniLM: the confident skill about string reversal loses to the less confident one
    about empty lists on an empty-list task, and a tight threshold drops it altogether."""
    about_lists = bank.skills.add(skill("Check for an empty list before reading its first element.", 0.4))
    about_strings = bank.skills.add(skill("Reverse the string with slicing s[::-1].", 0.9))
    critic_only = bank.skills.add(skill("Check for an empty list first.", 0.9, role="critic"))

    def injected(**options):
        config = MemoryConfig(enabled=True, skills_k=2, **options)
        task = TaskMemory(RunMemory(bank, config, "r1"), "T/1", TASK)
        return list(task.recall_call(with_memories(Coder), "coder", {"prompt": TASK}, None).ids)

    assert injected() == [about_lists.id, about_strings.id]
    assert injected(skills_max_distance=0.6) == [about_lists.id]
    assert critic_only.id not in injected(skills_max_distance=2.0)


@pytest.mark.parametrize("bad", [0.0, -0.1, 2.5])
def test_distance_threshold_is_checked(bad):
    with pytest.raises(ValueError, match="skills_max_distance"):
        MemoryConfig(skills_max_distance=bad)
