"""A small OpenAI-compatible chat server for tests: the real HTTP API, scripted replies.

The harness talks to it exactly as it talks to llama-cpp-python's server or a cloud endpoint
(through DSPy and LiteLLM), so tests exercise the real client path without a model.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[list[dict[str, Any]]], str]


def chat_reply(**fields: str) -> str:
    """A reply in DSPy's ChatAdapter format with the given output fields."""
    body = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in fields.items())
    return body + "[[ ## completed ## ]]"


class HttpError:
    """Return this from a responder to answer with an OpenAI-style error instead of a reply."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        self.status, self.message, self.code = status, message, code


def context_overflow(tokens: int = 5000, window: int = 4096) -> HttpError:
    """The error llama-cpp-python's server (like OpenAI's) sends when the prompt does not fit."""
    return HttpError(400, f"This model's maximum context length is {window} tokens. However, you "
                          f"requested {tokens} tokens ({tokens} in the messages, None in the completion).",
                     code="context_length_exceeded")


class RawReply:
    """Return this from a responder to send these exact bytes (a proxy's HTML page, broken JSON),
    with any extra ``headers`` (a 429's Retry-After)."""

    def __init__(self, body: bytes, status: int = 200, content_type: str = "application/json",
                 headers: dict[str, str] | None = None) -> None:
        self.body, self.status, self.content_type = body, status, content_type
        self.headers = headers or {}


def llama_server_overflow(tokens: int = 5000, window: int = 4096) -> RawReply:
    """The reply llama.cpp's llama-server sends when the prompt does not fit a slot (its code is
    the HTTP status, its type names the cause)."""
    error = {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": window,
             "message": f"request ({tokens} tokens) exceeds the available context size ({window} tokens), "
                        "try increasing it"}
    return RawReply(json.dumps({"error": error}).encode(), status=400)


class Hang:
    """Return this from a responder to answer nothing for ``seconds`` and then drop the request."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class Trickle:
    """Return this from a responder to send a reply's headers, then its body a byte every
    ``interval_s`` seconds: never silent long enough for a per-read timeout to fire."""

    def __init__(self, interval_s: float, body: bytes = b" " * 10_000) -> None:
        self.interval_s, self.body = interval_s, body


def completion(
    content: str | None, *, choices: bool = True, usage: bool = True, extra: dict[str, Any] | None = None,
) -> RawReply:
    """A well-formed chat completion whose text is ``content`` (None: JSON null), or with an
    empty ``choices`` list, or (``usage`` false) without the usage block some servers leave out;
    ``extra`` adds fields to the message (``tool_calls``, ``reasoning_content``)."""
    message = {"role": "assistant", "content": content, **(extra or {})}
    body: dict[str, Any] = {
        "id": "fake", "object": "chat.completion", "created": int(time.time()), "model": "fake",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}] if choices else [],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}
    return RawReply(json.dumps(body).encode())


class FakeOpenAIServer:
    """Serve ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1 in a background thread."""

    def __init__(
        self, responder: Responder, delay_s: float = 0.0, *, pass_body: bool = False,
        jitter_s: float = 0.0, jitter_seed: int = 0, prefix_cache: bool = False,
        cuts_at_max_tokens: bool = False,
    ) -> None:
        """``pass_body``: call ``responder(messages, body)`` so a script can read e.g. the seed.
        ``jitter_s``: each request also waits a random 0…jitter_s seconds (seeded), so concurrent
        requests come back in an order of their own. ``max_in_flight`` is the most requests that
        were being answered at once. ``prefix_cache``: report ``prompt_tokens_details.cached_tokens``
        as llama-server does — here the longest word prefix shared with an earlier request (at
        least one token is always evaluated); ``reused_tokens`` sums what was reported.
        ``cuts_at_max_tokens``: as a real server, stop a reply longer than the request's
        ``max_tokens`` (in words) there, with finish_reason "length"."""
        self.responder = responder
        self.pass_body = pass_body
        self.delay_s = delay_s
        self.jitter_s = jitter_s
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0
        self.prefix_cache = prefix_cache
        self.cuts_at_max_tokens = cuts_at_max_tokens
        self.seen_prompts: list[list[str]] = []
        self.reused_tokens = self.prompt_tokens = 0
        self._random = random.Random(jitter_seed)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, payload: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    delay = server.delay_s + server._random.uniform(0, server.jitter_s)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                messages = body.get("messages", [])
                try:
                    if delay:
                        time.sleep(delay)
                    args = (messages, body) if server.pass_body else (messages,)
                    text = server.responder(*args)
                finally:
                    # Before the reply is written: once the client has it, it may send its next
                    # request, which must not count as overlapping this one.
                    with server._lock:
                        server.in_flight -= 1
                self._reply(body, messages, text)

            def _reply(self, body: dict[str, Any], messages: list[dict[str, Any]], text: Any) -> None:
                if isinstance(text, Hang):
                    time.sleep(text.seconds)
                    return
                if isinstance(text, Trickle):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(text.body)))
                    self.end_headers()
                    for byte in text.body:
                        try:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                        except OSError:  # the client gave up
                            return
                        time.sleep(text.interval_s)
                    return
                if isinstance(text, RawReply):
                    self.send_response(text.status)
                    self.send_header("Content-Type", text.content_type)
                    self.send_header("Content-Length", str(len(text.body)))
                    for name, value in text.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(text.body)
                    return
                if isinstance(text, HttpError):  # a scripted API error, as a real server sends it
                    self._send({"error": {"message": text.message, "type": "invalid_request_error",
                                          "code": text.code}}, text.status)
                    return
                words = [w for m in messages for w in str(m.get("content", "")).split()]
                prompt_tokens = len(words)
                finish_reason, limit = "stop", body.get("max_tokens", body.get("max_completion_tokens"))
                if server.cuts_at_max_tokens and isinstance(limit, int) and len(text.split()) > limit:
                    end = [m.end() for m in re.finditer(r"\S+", text)][limit - 1] if limit else 0
                    finish_reason, text = "length", text[:end]  # its first max_tokens words, as written
                completion_tokens = len(text.split())
                usage: dict[str, Any] = {
                    "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                }
                if server.prefix_cache:
                    with server._lock:
                        reused = max((_shared_prefix(words, seen) for seen in server.seen_prompts), default=0)
                        reused = min(reused, max(prompt_tokens - 1, 0))
                        server.seen_prompts.append(words)
                        server.reused_tokens += reused
                        server.prompt_tokens += prompt_tokens
                    usage["prompt_tokens_details"] = {"cached_tokens": reused}
                self._send({
                    "id": f"fake-{len(server.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": finish_reason,
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": usage,
                })

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def completions(self) -> int:
        return sum(1 for r in self.requests if "messages" in r)

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _shared_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def humaneval_responder(problems: list[Any], wrong: set[str] = frozenset()) -> Responder:  # type: ignore[assignment]
    """Answer each problem with its canonical solution, or a wrong one for ``wrong`` task ids.

    The problem is found by its prompt text appearing in the request (as the coder sees it).
    """

    def respond(messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if "Reply with OK." in text:
            return "OK"
        for problem in problems:
            if problem.prompt.strip() in text:
                wrong_body = "    return None\n"
                body = wrong_body if problem.task_id in wrong else problem.canonical_solution
                code = problem.prompt + body
                if "Your answer is `" in text:  # the harness's CodeAdapter asks for a code block
                    return f"```python\n{code}\n```"
                return chat_reply(code=code)
        return chat_reply(code="pass")

    return respond
