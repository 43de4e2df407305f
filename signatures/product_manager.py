"""The product manager of the SOP line: the prompt restated as a typed spec."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field


class Spec(BaseModel):
    """The product manager's artifact: what the function must do, from the prompt alone."""

    function: str = Field(min_length=1, description="The function's name.")
    inputs: list[str] = Field(description="Each parameter: name, type and meaning.")
    output: str = Field(min_length=1, description="What the function returns.")
    edge_cases: list[str] = Field(default_factory=list, description="Edge cases the statement implies.")
    examples: list[str] = Field(default_factory=list, description="The statement's own examples, as written.")


class ProductManager(dspy.Signature):
    """You are a product manager. Restate the programming problem as a precise specification
    for the engineering team: the function's name, each input, the output, the edge cases the
    statement implies, and the statement's own examples exactly as written. Do not write code.
    If your previous specification was returned, fix what the rejection says."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    rejection: str = dspy.InputField(desc="Why your previous specification was returned, or 'none'.")
    spec: Spec = dspy.OutputField(desc="The specification.")
