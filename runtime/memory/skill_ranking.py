"""Which skills reach a role call: those closest to the task first, the most confident among
equally close ones, none farther than a distance threshold.

Distances are cosine distances between the MiniLM embedding of the recall query (the task's
prompt) and of the skill's template, the same model and metric as episodic recall. Distances
within one ``SIMILARITY_BAND`` count as equally close, so confidence decides between skills the
embedding cannot tell apart instead of only breaking exact float ties.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from critiquelab.runtime.memory.skills import Skill
from critiquelab.runtime.pool.embedder import Embedder

# MiniLM distances of one skill to similar prompts vary by a few hundredths: below that,
# similarity is noise and confidence is the better signal.
SIMILARITY_BAND = 0.05


@dataclass(frozen=True)
class RankedSkill:
    """A skill and its cosine distance to the task (0 = same direction)."""

    skill: Skill
    distance: float


def _cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - (sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0)


class SkillRanker:
    """Ranks skills against a query; remembers each template's vector (templates repeat on
    every role call of a run, the embedding is the cost)."""

    def __init__(self, embed: Embedder) -> None:
        self._embed = embed
        self._vectors: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _template_vectors(self, skills: Sequence[Skill]) -> list[list[float]]:
        with self._lock:
            missing = sorted({s.template for s in skills} - set(self._vectors))
        if missing:
            vectors = self._embed(missing)
            with self._lock:
                self._vectors.update(zip(missing, vectors, strict=True))
        return [self._vectors[s.template] for s in skills]

    def rank(
        self, query: str, skills: Sequence[Skill], *, max_distance: float, k: int
    ) -> list[RankedSkill]:
        """The ``k`` best skills within ``max_distance`` of ``query``: nearest band first, then
        highest confidence, then the older skill (a stable order)."""
        if k <= 0 or not skills:
            return []
        [query_vector] = self._embed([query])
        ranked = [
            RankedSkill(skill, _cosine_distance(query_vector, vector))
            for skill, vector in zip(skills, self._template_vectors(skills), strict=True)
        ]
        near = [r for r in ranked if r.distance <= max_distance]
        near.sort(key=lambda r: (math.floor(r.distance / SIMILARITY_BAND), -r.skill.confidence,
                                 r.skill.created_at))
        return near[:k]
