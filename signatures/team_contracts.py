"""Typed contracts of the architect team: what the architect hands a developer, what comes back,
what the reviewer is asked and what it answers. Messages of the ``architect`` pipeline carry
these as JSON, and the session tree's JSON Schema is generated from them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from critiquelab.signatures.review import Category, Severity

Priority = Literal["high", "medium", "low"]
DeveloperStatus = Literal["completed", "partial", "failed"]
ReviewVerdict = Literal["approved", "changes_requested", "rejected"]

VISIBLE_EXAMPLES_CRITERION = "must pass the examples visible in the problem"


class TaskAssignment(BaseModel):
    """One sub-task of the architect's plan: a function to write."""

    task_id: str = Field(description="Short unique id, e.g. 't1'.")
    function_name: str = Field(description="The one function this task defines (the problem's own "
                               "function for the main task, a helper's name otherwise).")
    description: str = Field(description="What the function must do: inputs, output, edge cases.")
    priority: Priority = Field(default="medium", description="high / medium / low: order within a wave.")
    dependencies: list[str] = Field(
        default_factory=list, description="task_ids whose functions this one calls; they are done first."
    )


class DeveloperInput(BaseModel):
    """What a developer gets for one task."""

    model_config = ConfigDict(extra="forbid")

    task: TaskAssignment = Field(description="The task to do.")
    context: str = Field(default="", description="Code it may call (finished dependencies) and, after a "
                         "review, the integrated solution and the reviewer's feedback.")
    allowed_functions: list[str] = Field(description="Function names it may define (private helpers "
                                         "starting with '_' are always allowed).")
    attempt: int = Field(default=1, ge=1, description="1 for the first try, more after a failure.")


class DeveloperOutput(BaseModel):
    """What a developer hands back."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="The task it answers.")
    status: DeveloperStatus = Field(description="completed: code defines the function; partial: code "
                                    "without it; failed: no usable code (unparsed, empty, timed out).")
    code: str = Field(default="", description="The code written.")
    summary: str = Field(default="", description="One line: what was delivered.")
    notes: list[str] = Field(default_factory=list, description="Things the architect should know.")
    blockers: list[str] = Field(default_factory=list, description="Why the task is not completed.")


class ReviewerInput(BaseModel):
    """What the reviewer is asked to check."""

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(description="What is under review, e.g. 'integrated solution, iteration 2'.")
    focus_areas: list[str] = Field(default_factory=list, description="Aspects to look at first.")
    criteria: list[str] = Field(default_factory=lambda: [VISIBLE_EXAMPLES_CRITERION],
                                description="Conditions an approval requires.")


class ReviewFinding(BaseModel):
    """One issue the reviewer found."""

    id: str = Field(default="", description="F1, F2 …; assigned in order when left empty.")
    severity: Severity = Field(description="critical / major / minor / suggestion")
    category: Category = Field(description="bug / logic / style / performance / security")
    line: int | None = Field(default=None, description="Line in the integrated code, if it applies.")
    description: str = Field(description="What is wrong.")
    suggestion: str = Field(default="", description="How to fix it.")


class Verification(BaseModel):
    """The reviewer's run of the integrated code on the problem's visible examples (sandboxed;
    never the hidden tests)."""

    examples: int = Field(description="Visible examples found in the problem.")
    passed: int = Field(description="How many of them the code passed.")
    report: str = Field(description="One line per example, as the sandbox reported it.")

    @property
    def all_passed(self) -> bool:
        return self.passed == self.examples


class ReviewerOutput(BaseModel):
    """The reviewer's decision on one integrated solution."""

    model_config = ConfigDict(extra="forbid")

    verdict: ReviewVerdict = Field(description="approved / changes_requested / rejected")
    findings: list[ReviewFinding] = Field(default_factory=list, description="Issues found.")
    verification: Verification = Field(description="Whether the visible examples passed.")
    summary: str = Field(default="", description="One line summarising the review.")
    overridden: bool = Field(default=False, description="The model approved, but the visible "
                             "examples failed, so the verdict became changes_requested.")


class ArchitectPlan(BaseModel):
    """The plan the architect settled on, and what it changed in its model's proposal."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[TaskAssignment] = Field(description="The tasks, in dependency order.")
    waves: list[list[str]] = Field(description="task_ids per wave; a wave's tasks run in parallel.")
    notes: list[str] = Field(default_factory=list, description="Fixes made to the proposal.")


class ArchitectDecision(BaseModel):
    """What the architect did about a developer that failed or timed out."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="The task that was not completed.")
    action: Literal["retry", "reassign", "abort"] = Field(
        description="retry: same developer again; reassign: another developer; abort: stop the run."
    )
    failed_developer: str = Field(description="The developer that failed.")
    next_developer: str | None = Field(default=None, description="Who gets the task next (not on abort).")
    reason: str = Field(description="The failure, as reported.")
