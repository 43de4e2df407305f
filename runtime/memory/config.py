"""The ``memory:`` option of a pipeline in an experiment spec."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from critiquelab.core.config import StrictModel
from critiquelab.signatures.memory import ROLE_OUTPUTS

DEFAULT_COLLECTION = "critiquelab_memory"
# A memory store is a Chroma collection: the names Chroma takes (and nothing that reads as a path).
STORE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,60}[A-Za-z0-9]$")
RecordedType = Literal["error_pattern", "review_feedback", "decision_outcome", "code_pattern"]
RECORDED_TYPES: tuple[RecordedType, ...] = (
    "error_pattern", "review_feedback", "decision_outcome", "code_pattern",
)
# Who benefits from whose lessons: a critic's findings are about code the coder and fixer write.
DEFAULT_SHARE_TO: dict[str, list[str]] = {
    "critic": ["coder", "fixer"], "coder": ["fixer"], "fixer": ["coder"],
}
# Settings added with recall-on-failure and verified demos: left at their defaults they change no
# request, so they stay out of a config's key (see MemoryConfig.key_values).
_RECALL_SETTINGS = ("recall", "max_distance", "lessons", "demos", "demo_selection", "demos_max_distance")


class MemoryConfig(StrictModel):
    """Episodic memory, skills and sharing for one pipeline. Off unless ``enabled``; when off,
    the pipeline's prompts are exactly those of a run without memory."""

    model_config = ConfigDict(frozen=True)  # one pipeline's settings, shared by its runs

    enabled: bool = Field(
        default=False, description="Recall memories into prompts and reflect after each task."
    )
    k: int = Field(default=3, ge=1, le=20, description="Episodic entries injected into one role call.")
    skills_k: int = Field(default=2, ge=0, le=20, description="Skills injected into one role call.")
    skills_max_distance: float = Field(
        default=1.0, gt=0, le=2,
        description="Skills farther than this cosine distance (MiniLM) from the task are not "
        "injected; the rest go nearest first, most confident among equally near ones. With MiniLM "
        "a skill about a similar task sits under about 0.7 from its prompt, a general lesson 0.8 to "
        "1.0; 1.0 (orthogonal) drops only skills pointing away from the task.",
    )
    roles: list[str] = Field(
        default_factory=lambda: ["coder", "fixer"],
        description="Roles whose signature gets the `memories` input field, and whose calls get "
        "demos when they write code from a prompt (by signature: coder, fixer, repairer, critic, "
        "debater, judge, meta_critic, self_feedback).",
    )
    recall: Literal["always", "on_failure"] = Field(
        default="always",
        description="When memory reaches a role call. always: every call of a memory role; "
        "on_failure: only a retry or a repair after the prompt's visible examples failed — "
        "reflexion's retry, or a call given code to revise (its `code` input: the critic loop's "
        "fixer, tree search's repairer) that fails a visible example; any other call (a first "
        "attempt) is sent exactly as without memory.",
    )
    max_distance: float | None = Field(
        default=None, gt=0, le=2,
        description="Episodic entries farther than this cosine distance (MiniLM) from the task "
        "prompt are not injected, so an unrelated lesson never reaches a prompt; null: no gate "
        "(the k nearest always go). A general lesson sits 0.8 to 1.0 from a HumanEval prompt, a "
        "lesson about a similar task nearer.",
    )
    lessons: bool = Field(
        default=True,
        description="Give the roles recalled entries and skills as text, in their `memories` "
        "field; false: no such field (verified demos only, see `demos`).",
    )
    demos: int = Field(
        default=0, ge=0, le=8,
        description="Verified demonstrations per call of a code-writing memory role: an earlier "
        "task's prompt and the final code that passed every one of its visible examples, given as "
        "DSPy demos (the signature's own few-shot turns, after any demos the program already has). "
        "0: none, and none are stored.",
    )
    demo_selection: Literal["nearest", "random"] = Field(
        default="nearest",
        description="nearest: the demos whose prompt is nearest the task's (as DSPy's KNNFewShot); "
        "random: a control — as many as nearest would give, drawn at random from every earlier "
        "task's verified demos (do similar examples help, or any examples?).",
    )
    demos_max_distance: float | None = Field(
        default=None, gt=0, le=2,
        description="Demos whose prompt is farther than this cosine distance (MiniLM) from the task "
        "prompt are not given; null: no gate. Between HumanEval prompts: a problem's nearest "
        "earlier one sits about 0.5 away (median over the first 40 of the dev half), unrelated "
        "problems about 0.7.",
    )
    approval: Literal["manual", "auto"] = Field(
        default="manual",
        description="manual: skills and entries shared to other roles reach prompts only after "
        "`critiquelab memory approve`; auto: at once.",
    )
    share_to: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_SHARE_TO.items()},
        description="Role -> roles that may benefit from its entries (each share is a proposal).",
    )
    store: str = Field(
        default=DEFAULT_COLLECTION, pattern=STORE_NAME.pattern,
        description="Chroma collection (and skills/proposals namespace) of this memory.",
    )
    scope: Literal["run", "all"] = Field(
        default="run",
        description="run: recall only what this pipeline × seed run wrote (plus `warm_start`), so "
        "results do not depend on earlier experiments; all: everything in the store.",
    )
    reflect: bool = Field(default=True, description="Reflect on each finished task (one reflector call).")
    record: list[RecordedType] = Field(
        default_factory=lambda: list(RECORDED_TYPES),
        description="Entries taken from each finished task's thread besides the reflection (no LM "
        "call): error_pattern (finding -> revision -> visible outcome), review_feedback (reviews "
        "asking for changes), decision_outcome (a role's decision — fixer's revision, critic's or "
        "reviewer's verdict, judge's choice, architect's retry/reassign/abort, QA engineer's pass/"
        "fail — and how the code it led to did on the visible examples), code_pattern (final code "
        "that passed every visible example).",
    )
    promote_after: int = Field(
        default=3, ge=2, description="Similar episodic entries (this one included) that make a skill."
    )
    promote_distance: float = Field(
        default=0.35, gt=0, le=2,
        description="Cosine distance under which two entries count as the same pattern for promotion.",
    )
    consolidate: bool = Field(default=False, description="Consolidate the store at the end of the run.")
    warm_start: str | None = Field(
        default=None,
        description="Run id whose memory is recalled too; refused when this run's problems overlap "
        "the problems that run learned on (unless allow_overlap).",
    )
    allow_overlap: bool = Field(
        default=False, description="Allow scoring on problems the warm-start memory was built on."
    )

    @model_validator(mode="after")
    def _settings_that_act(self) -> MemoryConfig:
        """A setting that could change nothing is a mistake in the spec, not a choice."""
        problem = None
        if not self.lessons and self.demos == 0:
            problem = "lessons: false with demos: 0 would inject nothing; set demos >= 1 or lessons: true"
        elif not self.lessons and self.max_distance is not None:
            problem = "max_distance gates the lessons, which lessons: false turns off"
        elif self.demos == 0 and (self.demo_selection != "nearest" or self.demos_max_distance is not None):
            problem = "demo_selection and demos_max_distance apply to demos; set demos >= 1"
        if problem:
            raise PydanticCustomError("memory_settings", "{message}", {"message": problem})
        return self

    @model_validator(mode="after")
    def _known_roles(self) -> MemoryConfig:
        """Memory reaches a role by its signature (``critiquelab.signatures.memory.ROLE_OUTPUTS``): a name
        in ``roles`` that is no such role (``coderr``) would leave memory reaching nothing,
        unnoticed; so would a ``share_to`` recipient that is no such role: it never recalls. (The
        keys of ``share_to`` name the role that wrote an entry, which may be any pipeline's agent,
        so they are not checked here.)"""
        named = [("roles", role, "") for role in self.roles] + [
            (f"share_to.{author}", role, " (it would never recall what is shared)")
            for author, recipients in self.share_to.items() for role in recipients
        ]
        for where, role, why in named:
            if role not in ROLE_OUTPUTS:
                message = f"{where}: unknown role '{role}'{why}; memory reaches: {', '.join(ROLE_OUTPUTS)}"
                raise PydanticCustomError("memory_roles", "{message}", {"message": message})
        return self

    def key_values(self) -> dict[str, object]:
        """The config as checkpoint and cost keys hash it: the recall settings only where they
        differ from their defaults, so a memory configured before they existed keeps its key (and
        an estimate still finds its measured costs)."""
        defaults = type(self).model_fields
        unchanged = {name for name in _RECALL_SETTINGS if getattr(self, name) == defaults[name].default}
        return self.model_dump(exclude=unchanged)
