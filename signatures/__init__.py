"""DSPy signatures, one per role behaviour. Imports only dspy and pydantic.

A signature's docstring is the role's instruction; every field is typed and has a ``desc``.
"""

from signatures.code_scorer import CodeScorer
from signatures.coder import Coder
from signatures.critic import Critic
from signatures.debater import Debater
from signatures.fixer import Fixer
from signatures.judge import Judge
from signatures.meta_critic import MetaCritic
from signatures.path_reflector import PathReflector
from signatures.reflector import Reflector
from signatures.repairer import Repairer
from signatures.review import Finding, Review, render_review
from signatures.self_refine import SelfFeedback

__all__ = [
    "CodeScorer", "Coder", "Critic", "Debater", "Finding", "Fixer", "Judge", "MetaCritic", "PathReflector",
    "Reflector", "Repairer", "Review", "SelfFeedback",
    "render_review",
]
