"""DSPy signatures, one per role behaviour. Imports only dspy and pydantic."""

from signatures.coder import Coder

__all__ = ["Coder"]
