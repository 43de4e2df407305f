"""Self-Refine: one model gives feedback on its own output, then refines it."""

from __future__ import annotations

import dspy


class SelfFeedback(dspy.Signature):
    """Review your own solution to the problem. Check it against every requirement and example.
    Say whether it is already correct, and if not, exactly what to change."""

    prompt: str = dspy.InputField(desc="The problem: a Python function signature and docstring.")
    code: str = dspy.InputField(desc="Your current implementation.")
    execution_feedback: str = dspy.InputField(desc="Results on the visible examples, or 'none'.")
    is_correct: bool = dspy.OutputField(desc="True if no change is needed.")
    feedback: str = dspy.OutputField(desc="What to change, concretely (empty if correct).")
