"""The engineer of the SOP line: code from the spec and the design, revised on QA's reports."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field


class CodeArtifact(BaseModel):
    """The engineer's artifact: one version of the implementation."""

    code: str = Field(min_length=1, description="The complete implementation.")


class Engineer(dspy.Signature):
    """You are an expert Python engineer. Implement the function described by the problem,
    following the specification and the architect's design. Write the complete function (its
    `def` line exactly as given) with the imports and helpers it needs; use only the standard
    library. When a QA report or review lists failures, fix every one of them and keep what
    already works. Do not include tests, examples or prints."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    spec: str = dspy.InputField(desc="The product manager's specification (JSON).")
    design: str = dspy.InputField(desc="The architect's design (JSON).")
    feedback: str = dspy.InputField(
        desc="The QA report or review of your previous version (failures: expected vs got), or 'none'."
    )
    implementation_code: str = dspy.OutputField(desc="The complete implementation, as plain code.")
