"""Call a role's predictor without letting malformed model output crash a pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError


@dataclass
class RoleResult:
    """A role call's outputs, or the raw text when the adapters could not parse it."""

    outputs: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    parsed: bool = True

    def get(self, name: str, default: Any = None) -> Any:
        return self.outputs.get(name, default)


def call_role(predictor: dspy.Module, **inputs: Any) -> RoleResult:
    """Run ``predictor``; DSPy's adapters already retry (ChatAdapter falls back to JSON).

    If the reply is still unparseable the step is recorded as unparsed with the raw text,
    so callers decide what that means (a coder's raw text is usually still code; a critic's
    unparsed review must never count as an approval).
    """
    try:
        prediction = predictor(**inputs)
    except AdapterParseError as exc:
        return RoleResult(raw=exc.lm_response or "", parsed=False)
    return RoleResult(outputs=dict(prediction.items()), raw="", parsed=True)
