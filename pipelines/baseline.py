"""The single-shot baseline: the coder answers once."""

from __future__ import annotations

import dspy

from pipelines.registry import register_pipeline
from pipelines.role_call import call_role
from signatures.coder import Coder


@register_pipeline("baseline")
class Baseline(dspy.Module):
    """Coder once; no review. The reference point every other pipeline is compared to."""

    def __init__(self) -> None:
        super().__init__()
        self.coder = dspy.Predict(Coder)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        result = call_role(self.coder, "coder", prompt=prompt)
        return dspy.Prediction(code=result.get("code", result.raw), iterations=1, parsed=result.parsed)
