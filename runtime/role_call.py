"""Call a role's predictor: never let malformed model output crash a pipeline, and keep
what the call took and gave (inputs, outputs, usage, latency) for the trace."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError, ContextWindowExceededError
from pydantic import BaseModel

from critiquelab.core.usage import UsageMeter, acting_as, current_meter, metering
from critiquelab.eval.assembly import contains_code
from critiquelab.runtime.recall import Recall, recalled
from critiquelab.runtime.role_lms import role_lm
from critiquelab.signatures.adapter import is_code_signature
from critiquelab.signatures.memory import MEMORIES_FIELD, has_memories


def to_jsonable(value: Any) -> Any:
    """Role outputs (pydantic models, lists of them, Literals) as plain JSON data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class UndeclaredOutputError(AttributeError):
    """A read of an output the role's signature does not declare (a misspelled field): raised at
    once, rather than reading as missing."""


@dataclass
class RoleResult:
    """A role call's outputs, or the raw text when the adapters could not parse it.

    The outputs read as attributes, as on a ``dspy.Prediction`` (``step.revised_code``), checked
    against the signature: a name it does not declare raises :class:`UndeclaredOutputError` (an
    ``AttributeError``) naming the signature and its outputs. A declared output the reply does not
    hold — every output of an unparsed reply (``parsed`` False, the text in ``raw``) or of a call
    that got no reply (``error``) — reads ``None``; that is the one value for "missing". An output
    named as one of the fields below (the input writer's ``inputs``) is read with :meth:`output`.
    The check is at run time: the type checker does not know these attributes or their types.
    """

    role: str
    inputs: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    parsed: bool = True
    usage: dict[str, float] = field(default_factory=dict)
    latency_s: float = 0.0
    error: str = ""  # why there is no reply at all (e.g. the prompt outgrew the context window)
    # Each LM call of this role call: the rendered prompt (chat messages) and the raw replies.
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)  # memories injected into this call
    signature: str = ""  # the signature's name and its declared outputs, what attribute reads check
    output_fields: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        # Called only for names that are not the dataclass's own fields. Private and dunder names
        # (copy and pickle probe some before __dict__ is filled) are never outputs.
        if name.startswith("_"):
            raise AttributeError(name)
        return self.output(name)

    def output(self, name: str) -> Any:
        """The output ``name`` (None when the reply does not hold it); for a name chosen at run
        time, where an attribute cannot be written."""
        fields: tuple[str, ...] = self.__dict__.get("output_fields", ())
        if name not in fields:
            signature = self.__dict__.get("signature") or self.__dict__.get("role")
            raise UndeclaredOutputError(
                f"{signature} has no output {name!r}; its outputs: {', '.join(fields)}"
            )
        return self.__dict__["outputs"].get(name)

    def declares(self, name: str) -> bool:
        """Whether the role's signature has the output ``name``."""
        return name in self.output_fields

    @property
    def total_tokens(self) -> int:
        """Tokens the call spent, prompt and completion (what a token budget counts)."""
        return int(self.usage.get("prompt_tokens", 0) + self.usage.get("completion_tokens", 0))

    def trace(self) -> dict[str, Any]:
        """What a pool message records of this call: the optimisers' training data."""
        return {
            "role": self.role, "inputs": to_jsonable(self.inputs),
            "outputs": to_jsonable(self.outputs), "parsed": self.parsed, "raw": self.raw,
            "usage": self.usage, "latency_s": round(self.latency_s, 4),
            **({"error": self.error} if self.error else {}),
            **({"exchanges": to_jsonable(self.exchanges)} if self.exchanges else {}),
            **({"memory_ids": self.memory_ids} if self.memory_ids else {}),
        }


def _usable(predictor: dspy.Module, outputs: dict[str, Any], parsed: bool) -> bool:
    """Whether the role got what it asked for: a parsed reply, and code where only code was asked
    for (a prose answer from a broken or misconfigured endpoint is no answer to keep)."""
    if not parsed:
        return False
    if is_code_signature(predictor.signature):
        (name,) = predictor.signature.output_fields
        return contains_code(str(outputs.get(name) or ""))
    return True


def _with_recall(predictor: dspy.Module, recall: Recall, inputs: dict[str, Any]) -> dict[str, Any]:
    """The arguments that give ``predictor`` what memory recalled for one call (``inputs`` gets
    the `memories` text where the caller left it out): the signature without the field memory
    added when the call gets nothing, and the recalled demos after the program's own."""
    extra: dict[str, Any] = {}
    if has_memories(predictor.signature) and MEMORIES_FIELD not in inputs:
        if recall.memories is None:
            extra["signature"] = predictor.signature.delete(MEMORIES_FIELD)
        else:
            inputs[MEMORIES_FIELD] = recall.memories
    if recall.demos:
        extra["demos"] = [*predictor.demos, *(dspy.Example(**demo) for demo in recall.demos)]
    return extra


def _reply_text(meter: UsageMeter, error: AdapterParseError) -> str:
    """An unparsed reply's text: the role's last reply as the harness's LM read it (its text
    alone; none when the model put nothing there). DSPy's error holds ``str()`` of its output,
    which for a reply carrying tool calls or reasoning beside null text is a dict's repr, whose
    quoted code would otherwise be tested as the answer."""
    replies = meter.exchanges[-1]["replies"] if meter.exchanges else None
    if replies:
        return str(replies[0])
    return error.lm_response or ""


def call_role(
    predictor: dspy.Module, role: str, *, config: dict[str, Any] | None = None,
    recall: Recall | None = None, after_failure: bool | None = None, **inputs: Any
) -> RoleResult:
    """Run ``predictor`` as ``role``. DSPy's adapters already retry (ChatAdapter falls back to
    JSON); if the reply is still unparseable the step is recorded as unparsed with the raw
    text, so the caller decides what that means (a coder's raw text is usually still code; a
    critic's unparsed review must never count as an approval). A prompt too long for the
    model's context is recorded the same way, with ``error`` saying so. ``config`` holds LM
    settings for this call (temperature, seed, rollout_id), e.g. to draw independent samples; they
    apply on top of the role's LM (:func:`critiquelab.runtime.role_lms.role_lm`) where one is bound. With
    memory on, a call gets what memory recalls for ``role`` (:mod:`critiquelab.runtime.recall`; the
    ``memories`` text, demos) unless the caller recalled itself and passes ``recall`` with its own
    ``memories`` text; ``after_failure`` tells memory whether the call is a retry after the visible
    examples failed (None: memory judges from the inputs). A reply the role cannot use (unparsed,
    or no code from a code-writing role) is dropped from the LM cache, so a later run asks the
    model again, and is counted for ``role`` on the task's meter (a prompt too long for the context
    as an unparsed reply: the role got no answer either way), with DSPy's retries."""
    if recall is None and MEMORIES_FIELD not in inputs:
        recall = recalled(predictor.signature, role, inputs, after_failure)
    extra = _with_recall(predictor, recall, inputs) if recall is not None else {}
    memory_ids = list(recall.ids) if recall is not None else []
    meter = UsageMeter(parent=current_meter())
    start = time.monotonic()
    outputs: dict[str, Any] = {}
    raw, parsed, error = "", True, ""
    lm = role_lm(role)  # the experiment may give this role its own model or temperature
    with metering(meter), acting_as(role):
        try:
            reply = predictor(**inputs, **extra, config=config or {}, **({"lm": lm} if lm else {}))
            outputs = dict(reply.items())
        except AdapterParseError as exc:
            raw, parsed = _reply_text(meter, exc), False
        except ContextWindowExceededError as exc:
            # One problem's conversation outgrew the model (a long critique round, a big
            # debate): an unparsed step for this problem, not the end of the experiment.
            parsed, error = False, f"context window exceeded: {str(exc).splitlines()[0][:300]}"
    usable = _usable(predictor, outputs, parsed)
    if not usable:
        meter.forget_replies()  # not kept in the LM cache: a later run asks again, not replays it
    total = meter.total()
    # Counted here, where every role's reply is parsed, so no pipeline has to: the run's metrics
    # and warnings name the roles whose replies were unusable (critiquelab.experiments.run_warnings). Each
    # role call is one predictor call, which asks once; calls beyond that are DSPy asking again
    # (ChatAdapter falls back to JSONAdapter) after a reply it could not parse.
    meter.count(role, unparsed_replies=int(not parsed), codeless_replies=int(parsed and not usable),
                reply_retries=max(total.calls - 1, 0))
    usage: dict[str, float] = {
        "calls": total.calls, "cached_calls": total.cached_calls,
        "prompt_tokens": total.prompt_tokens, "completion_tokens": total.completion_tokens,
    }
    return RoleResult(
        role, inputs, outputs, raw, parsed, usage, time.monotonic() - start, error,
        exchanges=list(meter.exchanges), memory_ids=memory_ids,
        signature=predictor.signature.__name__, output_fields=tuple(predictor.signature.output_fields),
    )


def fell_back(role: str) -> None:
    """Count a fallback the pipeline took because it could not use ``role``'s answer (a judge that
    did not decide, a critique that could not be read): the pipeline goes on without that role's
    say, so it is counted and warned about as an unparsed reply is (critiquelab.experiments.run_warnings).
    Called by the pipeline where it decides so, in the role call's context (its task's meter)."""
    meter = current_meter()
    if meter is not None:
        meter.count(role, fallbacks=1)
