"""Per-task accounting of LM usage, attributed to the role that made each call.

The LM client reports every call (cached or not) to the meter active in the current
context; pipelines name the role around each call. Context variables keep concurrent
problems in separate threads apart without any global state.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

_current_meter: ContextVar[UsageMeter | None] = ContextVar("critiquelab_meter", default=None)
_current_role: ContextVar[str] = ContextVar("critiquelab_role", default="unattributed")


@dataclass
class RoleUsage:
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    # The seconds the model took to answer, as measured when each call was made (a call replayed
    # from the LM cache counts the time recorded with it, as it counts its tokens; one cached
    # before times were kept counts none), and the tokens of the calls those seconds cover: a
    # model's measured seconds per token, the same for a resumed run as for an uninterrupted one.
    model_s: float = 0.0
    timed_tokens: int = 0
    # Prompt-prefix reuse as the server reported it (llama-server, OpenAI: cached_tokens): of the
    # prompt tokens of calls whose server says, how many it took from its cache instead of
    # evaluating them. Endpoints that do not say leave both at 0, so no ratio is claimed.
    reused_prompt_tokens: int = 0
    reuse_reported_prompt_tokens: int = 0
    # Replies that ended because they reached the request's max_tokens: cut off, not finished.
    truncated_replies: int = 0
    # What the role could not use (counted where a role's reply is parsed, critiquelab.runtime.role_call):
    # role calls whose reply did not parse into the signature's fields, replies of a code-writing
    # role that hold no code, LM calls beyond a role call's first (DSPy asking again after a reply
    # it could not parse), and fallbacks the pipeline took in place of the role's answer.
    unparsed_replies: int = 0
    codeless_replies: int = 0
    reply_retries: int = 0
    fallbacks: int = 0


@dataclass
class UsageMeter:
    """Usage of one task. ``calls`` counts every LM call; ``cached_calls`` those served by cache.

    Token counts include cached calls (with the usage recorded when they were first made), so a
    resumed or re-run experiment reports the same tokens as an uninterrupted one.
    """

    by_role: dict[str, RoleUsage] = field(default_factory=dict)
    parent: UsageMeter | None = field(default=None, repr=False)
    # What each call sent and got back, on this meter only (a role call's: the rendered prompt
    # and the raw reply for the viewer), not on its parent's.
    exchanges: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _forgetters: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(
        self, *, prompt_tokens: int, completion_tokens: int, latency_s: float, cached: bool,
        reused_prompt_tokens: int | None = None, model_s: float | None = None, truncated_replies: int = 0,
    ) -> None:
        """``reused_prompt_tokens``: prompt tokens the server took from its prefix cache, or
        None when it did not say. ``model_s``: the seconds the model took when the call was made
        (``latency_s`` for a live call), None when not known. ``truncated_replies``: the call's
        replies that stopped at its max_tokens."""
        with self._lock:
            usage = self.by_role.setdefault(_current_role.get(), RoleUsage())
            usage.calls += 1
            usage.cached_calls += int(cached)
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.latency_s += latency_s
            usage.truncated_replies += truncated_replies
            if model_s is not None:
                usage.model_s += model_s
                usage.timed_tokens += prompt_tokens + completion_tokens
            if reused_prompt_tokens is not None:
                usage.reused_prompt_tokens += reused_prompt_tokens
                usage.reuse_reported_prompt_tokens += prompt_tokens
        if self.parent is not None:  # a role call's meter also counts toward its task's
            self.parent.record(
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                latency_s=latency_s, cached=cached, reused_prompt_tokens=reused_prompt_tokens,
                model_s=model_s, truncated_replies=truncated_replies,
            )

    def count(
        self, role: str, *, unparsed_replies: int = 0, codeless_replies: int = 0, reply_retries: int = 0,
        fallbacks: int = 0,
    ) -> None:
        """Count what ``role`` could not use (see :class:`RoleUsage`); on the task's meter too.
        Nothing to count adds no role (a role is listed by the calls it made)."""
        if not (unparsed_replies or codeless_replies or reply_retries or fallbacks):
            return
        with self._lock:
            usage = self.by_role.setdefault(role, RoleUsage())
            usage.unparsed_replies += unparsed_replies
            usage.codeless_replies += codeless_replies
            usage.reply_retries += reply_retries
            usage.fallbacks += fallbacks
        if self.parent is not None:
            self.parent.count(role, unparsed_replies=unparsed_replies, codeless_replies=codeless_replies,
                              reply_retries=reply_retries, fallbacks=fallbacks)

    def exchange(
        self, request: Any, replies: list[str], forget: Callable[[], None] | None = None,
        *, settings: dict[str, Any] | None = None,
    ) -> None:
        """Keep one call's request (chat messages or prompt text), its sampling settings
        (temperature, seed, max_tokens …: what, with the request, decides the reply) and reply
        texts. ``forget`` removes the reply from the LM's response cache, should the caller judge
        it unusable."""
        with self._lock:
            self.exchanges.append({"request": request, "settings": settings or {}, "replies": replies})
            if forget is not None:
                self._forgetters.append(forget)

    def forget_replies(self) -> int:
        """Remove every reply this meter saw from the LM cache (a role's reply that was
        unparsable or held no code: a later run asks again instead of replaying it); how many."""
        with self._lock:
            forgetters, self._forgetters = self._forgetters, []
        for forget in forgetters:
            forget()
        return len(forgetters)

    def total(self) -> RoleUsage:
        total = RoleUsage()
        with self._lock:  # calls in other threads may record meanwhile (parallel agents)
            for usage in self.by_role.values():
                total.calls += usage.calls
                total.cached_calls += usage.cached_calls
                total.prompt_tokens += usage.prompt_tokens
                total.completion_tokens += usage.completion_tokens
                total.latency_s += usage.latency_s
                total.model_s += usage.model_s
                total.timed_tokens += usage.timed_tokens
                total.reused_prompt_tokens += usage.reused_prompt_tokens
                total.reuse_reported_prompt_tokens += usage.reuse_reported_prompt_tokens
                total.truncated_replies += usage.truncated_replies
                total.unparsed_replies += usage.unparsed_replies
                total.codeless_replies += usage.codeless_replies
                total.reply_retries += usage.reply_retries
                total.fallbacks += usage.fallbacks
        return total


def current_meter() -> UsageMeter | None:
    return _current_meter.get()


@contextlib.contextmanager
def metering(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Attribute LM calls made inside this block (in this thread/context) to ``meter``."""
    token = _current_meter.set(meter)
    try:
        yield meter
    finally:
        _current_meter.reset(token)


@contextlib.contextmanager
def acting_as(role: str) -> Iterator[None]:
    """Attribute LM calls made inside this block to ``role``."""
    token = _current_role.set(role)
    try:
        yield
    finally:
        _current_role.reset(token)
