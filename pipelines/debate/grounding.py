"""Execution-grounded debate: every solution a debater publishes is run on the examples the
prompt shows, and debaters and the judge read what it did beside the code.

Only the prompt's *visible* examples are run (:func:`critiquelab.eval.visible_examples.visible_examples`);
hidden tests never reach a prompt. The judge rule (``judge_rule: visible_pass``) reads the same
results: it never lets the answer be a solution that fails a visible example while a debater's
final solution passes them all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from critiquelab.eval.visible_examples import VisibleExample, code_feedback, visible_examples

JudgeRule = Literal["none", "visible_pass"]
JUDGE_RULES: tuple[str, ...] = get_args(JudgeRule)

RESULTS_HEADING = "On the examples shown in the problem:"


@dataclass(frozen=True)
class ExampleResults:
    """What one solution did on the visible examples: the lines a role reads, and the verdict."""

    report: str
    passed: bool
    duration_s: float

    def metadata(self) -> dict[str, Any]:
        """What a proposal or argument message records of its own run."""
        return {"visible_report": self.report, "visible_passed": self.passed,
                "visible_duration_s": round(self.duration_s, 4)}


@dataclass
class Grounding:
    """Runs solutions of one problem on its visible examples (in the sandbox), remembering each
    code's results: the judge and the rule read the debaters' final solutions again."""

    prompt: str
    entry_point: str
    timeout_s: float
    examples: list[VisibleExample] = field(init=False)
    _seen: dict[str, ExampleResults] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.examples = visible_examples(self.prompt, self.entry_point)

    def results(self, code: str) -> ExampleResults:
        if code not in self._seen:
            start = time.monotonic()
            feedback = code_feedback(self.prompt, code, self.entry_point, self.examples,
                                     timeout_s=self.timeout_s)
            self._seen[code] = ExampleResults(feedback.report, feedback.all_passed, time.monotonic() - start)
        return self._seen[code]


def with_results(code: str, report: str | None) -> str:
    """A solution as a role reads it: fenced code, then (grounded) what it did on the examples."""
    block = f"```python\n{code}\n```"
    return block if report is None else f"{block}\n{RESULTS_HEADING}\n{report}"


def rule_override(chosen_passed: bool, finals_passed: Sequence[bool]) -> int | None:
    """The visible_pass rule: the index of the final solution that replaces an answer failing the
    visible examples (the lowest-numbered one that passes them all: on the examples every passing
    solution behaves alike, so nothing there tells them apart), or None when the answer passes or
    no final solution does."""
    if chosen_passed:
        return None
    return next((i for i, passed in enumerate(finals_passed) if passed), None)
