"""DSPy signatures, one per role behaviour. Imports only dspy and pydantic.

A signature's docstring is the role's instruction; every field is typed and has a ``desc``.
"""

from signatures.coder import Coder
from signatures.critic import Critic
from signatures.debater import Debater
from signatures.fixer import Fixer
from signatures.judge import Judge
from signatures.meta_critic import MetaCritic
from signatures.reflector import Reflector
from signatures.review import Finding, Review, render_review
from signatures.self_refine import SelfFeedback

__all__ = [
    "Coder", "Critic", "Debater", "Finding", "Fixer", "Judge", "MetaCritic", "Reflector", "Review",
    "SelfFeedback",
    "render_review",
]
