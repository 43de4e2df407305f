"""The LM client the harness uses: DSPy's LM with an explicit, endpoint-scoped response cache
and per-role usage metering.

Why our own cache instead of DSPy's: DSPy's key ignores ``api_base`` (so two endpoints serving
the same model name would share entries) and a cache hit reports no token usage (so a resumed
run would report fewer tokens than an uninterrupted one). Here the key is a SHA-256 over the
endpoint identity (for the bundled model: its file hash) and the full request, and each entry
keeps the usage recorded when the call was first made.

What the cache never keeps: a reply with no text (a protocol failure or a stalled model), and a
reply the role that asked for it could not use — unparsable, or no code where code was asked
for: :func:`critiquelab.runtime.role_call.call_role` has it forgotten, so a later run asks again. With
``refresh`` (``--no-cache``) nothing is read and every answer replaces the one cached before.

One request per key at a time: a call asking what another call (of this LM or a copy) is asking
right now waits for that answer, so identical requests made at once — two child runs' first
problems under ``parallel_runs`` — get one answer from the model, as one after another would.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.exceptions import (
    ContextWindowExceededError,
    LMError,
    LMInvalidRequestError,
    LMTimeoutError,
    is_retryable_lm_error,
)
from dspy.utils.usage_tracker import track_usage

from critiquelab.core.errors import ServiceError, error_line
from critiquelab.core.usage import current_meter

# Request settings that do not change a reply, so they stay out of the cache key.
_TRANSPORT_KWARGS = ("timeout", "num_retries")
# llama.cpp's llama-server says a prompt does not fit a slot with HTTP 400, error type
# exceed_context_size_error and this message; DSPy's OpenAI client recognises only OpenAI's
# context_length_exceeded code, so it would pass as an endpoint failure.
_LLAMA_SERVER_OVERFLOW = "exceeds the available context size"
# The longest wait before a retry. DSPy waits as long as an endpoint's Retry-After asks (a day,
# from a hostile or misconfigured one), so the harness retries itself: every wait is bounded.
MAX_RETRY_WAIT_S = 30.0


def _usage_numbers(totals: dict[str, dict[str, Any]]) -> tuple[int, int, int | None]:
    """Prompt and completion tokens, and the prompt tokens the server reused from its prefix
    cache (``prompt_tokens_details.cached_tokens``; None when the server does not report it)."""
    prompt = completion = 0
    reused: int | None = None
    for usage in totals.values():
        prompt += int(usage.get("prompt_tokens") or 0)
        completion += int(usage.get("completion_tokens") or 0)
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and details.get("cached_tokens") is not None:
            reused = (reused or 0) + int(details["cached_tokens"])
    return prompt, completion, reused


class HarnessLM(dspy.LM):
    """``dspy.LM`` that caches responses on disk under ``cache_dir`` and reports usage.

    ``identity`` names the endpoint for the cache key: ``local:<model sha256>`` for the bundled
    model (whose port changes every run), ``<model>@<api_base>`` otherwise. ``refresh``: ask
    the model every time and keep its answer in place of the cached one.
    """

    def __init__(
        self, model: str, *, identity: str, cache_dir: Path | None, refresh: bool = False, **kwargs: Any
    ) -> None:
        # DSPy's own response cache is off: this class is the cache (see module docstring).
        super().__init__(model, cache=False, **kwargs)
        self.identity = identity
        self.cache_dir = cache_dir
        self.refresh = refresh
        # Set on the start-up probe's copy: its failures say "at start-up" and name its own limit.
        self.probing = False
        # What served it, for the run's params (the local server's name, version, slots); empty
        # for an endpoint given by its URL.
        self.served_by: dict[str, str] = {}
        self._store = _SharedCache(cache_dir)
        self._flights = _Flights()

    @property
    def num_retries(self) -> int:
        """What DSPy's executor reads to retry a request itself: nothing (see
        :data:`MAX_RETRY_WAIT_S`); :meth:`_request` makes ``retries`` retries."""
        return 0

    @num_retries.setter
    def num_retries(self, value: int) -> None:  # dspy.LM's constructor and copy() set it
        self.retries = value

    def _settings(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request's settings that can change its reply (temperature, seed, max_tokens …)."""
        return {
            k: v for k, v in {**self.kwargs, **kwargs}.items()
            if not k.startswith("api_") and k not in _TRANSPORT_KWARGS
        }

    def _truncated(self, outputs: list[Any], completion_tokens: int, kwargs: dict[str, Any]) -> int:
        """1 when the call's one reply used its whole max_tokens, i.e. the server cut it there.
        Why not the reply's finish_reason: DSPy keeps it only in its call history (off when history
        is disabled); the token count says the same for a one-reply call, cached or live. The
        harness asks one reply per call; a call with several cannot be told apart: 0."""
        settings = self._settings(kwargs)
        limit = settings.get("max_tokens") or settings.get("max_completion_tokens")
        if len(outputs) != 1 or not isinstance(limit, int) or isinstance(limit, bool):
            return 0
        return int(completion_tokens >= limit)

    def _key(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> str:
        request = {
            "identity": self.identity,
            "model": self.model,
            "model_type": self.model_type,
            "kwargs": self._settings(kwargs),
            "prompt": prompt,
            "messages": messages,
        }
        blob = json.dumps(request, sort_keys=True, default=repr, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        use_cache = kwargs.pop("cache", True)
        if prompt is not None and not isinstance(prompt, str):
            # An explicit dspy.lm15.Request: not a call this harness makes; pass it through.
            return super().__call__(prompt, messages=messages, **kwargs)
        store = self._store.get() if use_cache else None
        if store is None:
            return self._answer(prompt, messages, kwargs, None, "")
        key = self._key(prompt, messages, kwargs)
        with self._flights.one(key):
            return self._answer(prompt, messages, kwargs, store, key)

    def _answer(self, prompt: Any, messages: Any, kwargs: dict[str, Any], store: Any, key: str) -> Any:
        """The cached answer to the request (``store`` None: no cache), else the model's."""
        entry = store.get(key) if store is not None and not self.refresh else None
        meter = current_meter()
        forget = functools.partial(store.delete, key) if store is not None else None
        if entry is not None:
            if meter is not None:  # usage as recorded when the call was made, as tokens are
                meter.record(
                    prompt_tokens=entry["prompt_tokens"], completion_tokens=entry["completion_tokens"],
                    latency_s=0.0, cached=True, reused_prompt_tokens=entry.get("reused_prompt_tokens"),
                    model_s=entry.get("latency_s"),
                    truncated_replies=self._truncated(entry["outputs"], entry["completion_tokens"], kwargs),
                )
                replies = [_text_of(o) for o in entry["outputs"]]
                meter.exchange(
                    messages if messages is not None else prompt, replies, forget,
                    settings=self._settings(kwargs),
                )
            return list(entry["outputs"])
        start = time.monotonic()
        with track_usage() as tracker:
            outputs = self._request(prompt, messages, kwargs)
        latency = time.monotonic() - start
        prompt_tokens, completion_tokens, reused = _usage_numbers(tracker.get_total_tokens())
        if meter is not None:
            meter.record(
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                latency_s=latency, cached=False, reused_prompt_tokens=reused, model_s=latency,
                truncated_replies=self._truncated(outputs, completion_tokens, kwargs),
            )
            replies = [_text_of(o) for o in outputs]
            meter.exchange(
                messages if messages is not None else prompt, replies, forget, settings=self._settings(kwargs)
            )
        # A reply with no text (no choices, null or empty content) broke the protocol or the model
        # stalled: it is scored as "no code", never cached, so a fixed endpoint gets asked again.
        if store is not None and any(_text_of(o).strip() for o in outputs):
            store.set(
                key,
                {"outputs": list(outputs), "prompt_tokens": prompt_tokens,
                 "completion_tokens": completion_tokens, "reused_prompt_tokens": reused,
                 "latency_s": round(latency, 3)},
            )
        return outputs

    def _request(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        """One request, retried ``retries`` times after a transient failure (each attempt
        bounded by ``timeout``, each wait by :data:`MAX_RETRY_WAIT_S`); an endpoint still failing
        after that is a :class:`ServiceError`, not a crash."""
        attempt = 0
        limit = {**self.kwargs, **kwargs}.get("timeout")
        call = functools.partial(super().__call__, prompt, messages=messages, **kwargs)
        while True:
            try:
                return within(limit, call)
            except ContextWindowExceededError:
                raise  # the prompt's fault, not the endpoint's: the role records an unparsed step
            except LMInvalidRequestError as exc:
                if _LLAMA_SERVER_OVERFLOW not in str(exc):
                    raise self._service_error(exc) from exc
                raise ContextWindowExceededError(model=self.model, message=str(exc)) from exc
            except LMError as exc:
                if attempt >= self.retries or not is_retryable_lm_error(exc):
                    raise self._service_error(exc) from exc
                time.sleep(retry_wait(exc, attempt))
                attempt += 1

    def _service_error(self, exc: LMError) -> ServiceError:
        where = self.kwargs.get("api_base") or self.model
        first = error_line(exc)
        if "timed out" in first or isinstance(exc, LMTimeoutError):
            # DSPy's own advice names its internals; ours names the setting a user has.
            limit = self.kwargs.get("timeout")
            within = f"within {limit:g} s" if isinstance(limit, int | float) else "in time"
            setting = "the start-up probe's own limit" if self.probing else (
                "model.timeout_s / --request-timeout")
            first = f"no answer {within} ({setting})"
        when = "at start-up" if self.probing else "mid-run"
        return ServiceError(f"model endpoint {where} failed {when}: {first}")

    def with_cache(self, holder: Any) -> HarnessLM:
        """A copy that keeps its responses in ``holder`` (``get()`` gives an object with diskcache's
        ``get(key)``/``set(key, value)``/``delete(key)``; ``close()``) instead of a directory: the Ray
        executor's cluster-wide cache. Keys are unchanged, so either cache replays the other's answers."""
        lm: HarnessLM = self.copy()  # dspy.LM.copy is untyped: a deep copy, so of this class
        lm._store = holder
        return lm

    def close(self) -> None:
        self._store.close()
        super().close()


def within(seconds: object, call: Callable[[], Any]) -> Any:
    """``call()``, given up with :class:`LMTimeoutError` once it has taken ``seconds`` in all (a
    number; anything else: unbounded here). Why: the transport's timeout bounds each wait for the
    next byte, so an endpoint that trickles its reply a byte at a time never times out there. The
    call runs in a daemon thread with the caller's context (DSPy's settings, the usage meter);
    given up, it is left to end on its own and its reply is dropped."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return call()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["reply"] = call()
        except BaseException as exc:  # handed to the caller as it is
            outcome["error"] = exc
        finally:
            done.set()

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(attempt,), daemon=True, name="lm-request").start()
    if not done.wait(seconds):
        raise LMTimeoutError(f"the request timed out: no complete reply in {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]


def retry_wait(exc: LMError, attempt: int) -> float:
    """Seconds before retry ``attempt + 1``: the endpoint's Retry-After when it gives a usable
    one, else 1, 2, 4 … s; never more than :data:`MAX_RETRY_WAIT_S`."""
    hint = getattr(exc, "retry_after", None)
    if isinstance(hint, int | float) and not isinstance(hint, bool) and 0 <= hint < math.inf:
        return min(float(hint), MAX_RETRY_WAIT_S)
    return min(2.0 ** min(attempt, 5), MAX_RETRY_WAIT_S)


class _Flights:
    """A lock per cache key in use, shared by an LM and its copies (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> (its lock, the callers holding or waiting for it)
        self._keys: dict[str, tuple[threading.Lock, int]] = {}

    @contextlib.contextmanager
    def one(self, key: str) -> Iterator[None]:
        with self._lock:
            lock, callers = self._keys.get(key, (threading.Lock(), 0))
            self._keys[key] = (lock, callers + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, callers = self._keys[key]
                if callers == 1:
                    del self._keys[key]
                else:
                    self._keys[key] = (lock, callers - 1)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Flights:
        return self  # copies (per seed, per sample) wait for each other's identical requests

    def __getstate__(self) -> dict[str, Any]:
        return {}  # locks do not travel: a pickled LM (a Ray worker's) gets its own

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]


class _SharedCache:
    """The on-disk response cache of one LM and every copy of it: DSPy's ``copy()`` is shallow,
    so copies (one per seed, per sample) share this holder, open one connection, and the
    original's ``close()`` closes it — none is left for the garbage collector to close later."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._cache: Any = None
        self._lock = threading.Lock()  # two threads' first calls must not open two connections

    def get(self) -> Any:
        if self.directory is None:
            return None
        with self._lock:
            if self._cache is None:
                import diskcache

                self._cache = diskcache.Cache(str(self.directory), size_limit=8 * 2**30)
            return self._cache

    def close(self) -> None:
        with self._lock:
            if self._cache is not None:
                self._cache.close()
                self._cache = None

    def __deepcopy__(self, memo: dict[int, Any]) -> _SharedCache:
        return self  # a deep-copied program still talks to the same cache

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": self.directory}  # a pickled LM reopens the cache where it lands

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"])  # type: ignore[misc]


def _text_of(output: Any) -> str:
    """A completion's text (DSPy returns strings, or dicts with ``text`` for tool/reasoning replies)."""
    if isinstance(output, dict):
        return str(output.get("text") or "")
    return str(output or "")
