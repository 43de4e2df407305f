"""DSPy signatures, one per role behaviour. Imports only dspy and pydantic.

A signature's docstring is the role's instruction; every field is typed and has a ``desc``.
"""

from critiquelab.signatures.code_scorer import CodeScorer
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.critic import Critic
from critiquelab.signatures.debater import Debater
from critiquelab.signatures.fixer import Fixer
from critiquelab.signatures.judge import Judge
from critiquelab.signatures.meta_critic import MetaCritic
from critiquelab.signatures.path_reflector import PathReflector
from critiquelab.signatures.reflector import Reflector
from critiquelab.signatures.repairer import Repairer
from critiquelab.signatures.review import Finding, Review, render_review
from critiquelab.signatures.self_refine import SelfFeedback

__all__ = [
    "CodeScorer", "Coder", "Critic", "Debater", "Finding", "Fixer", "Judge", "MetaCritic", "PathReflector",
    "Reflector", "Repairer", "Review", "SelfFeedback",
    "render_review",
]
