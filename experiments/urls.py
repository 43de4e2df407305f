"""What makes an http(s) URL unusable as an endpoint or a tracking server, found before anything
uses it: the libraries that take it (LiteLLM, MLflow) fail only at their first request."""

from __future__ import annotations

from urllib.parse import urlsplit


def http_url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL with a host and a valid port, or None when it is."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed IPv6 bracket: http://[::1
        return str(exc)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000/v1"
    try:
        parts.port  # noqa: B018 - raises on a port out of range or not a number
    except ValueError as exc:
        return str(exc)
    if any(c.isspace() for c in url):  # sent as written, to a host that is not there
        return "must not contain spaces"
    return None
