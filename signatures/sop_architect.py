"""The architect of the SOP line: the spec turned into an interface and an approach."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field


class Design(BaseModel):
    """The architect's artifact: the interface the engineer implements."""

    signature: str = Field(min_length=1, description="The function's `def` line, as in the problem.")
    helpers: list[str] = Field(default_factory=list, description="Helper functions, one line each.")
    approach: str = Field(min_length=1, description="The algorithm, in a few sentences.")


class SopArchitect(dspy.Signature):
    """You are a software architect. From the problem and the product manager's specification,
    design the implementation: the function's `def` line exactly as in the problem, any helper
    functions (one line each), and the algorithm in a few sentences. Do not write the code.
    If your previous design was returned, fix what the rejection says."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    spec: str = dspy.InputField(desc="The product manager's specification (JSON).")
    rejection: str = dspy.InputField(desc="Why your previous design was returned, or 'none'.")
    design: Design = dspy.OutputField(desc="The design.")
