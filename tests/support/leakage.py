"""The hidden-test leakage check for any pipeline's LM requests (new roles included)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from support.role_responder import role_of


def _sent(requests: Iterable[dict[str, Any]]) -> tuple[str, str]:
    requests = list(requests)
    raw = "\n".join(str(m.get("content", "")) for r in requests for m in r.get("messages", []))
    return raw, "\n".join(json.dumps(r) for r in requests)


def assert_no_hidden_tests(problems: Sequence[Any], requests: Sequence[dict[str, Any]]) -> int:
    """No line of a hidden test that the prompt does not already show appears in any request.
    Returns how many lines were checked (so a caller can tell the check had something to do)."""
    raw, encoded = _sent(requests)
    checked = 0
    for problem in problems:
        for line in problem.test.splitlines():
            line = line.strip()
            if len(line) >= 12 and line not in problem.prompt:
                checked += 1
                assert line not in raw and json.dumps(line)[1:-1] not in encoded, (problem.task_id, line)
    return checked


def assert_prompt_only(
    problems: Sequence[Any], requests: Sequence[dict[str, Any]], roles: set[str]
) -> int:
    """Requests of ``roles`` (those that must work from the prompt alone: test writers, product
    managers, task specifiers …) carry neither hidden-test lines nor the reference solution's.
    Returns how many requests of those roles were checked."""
    chosen = [r for r in requests if role_of(r.get("messages", [])) in roles]
    assert_no_hidden_tests(problems, chosen)
    raw, encoded = _sent(chosen)
    for problem in problems:
        for line in (problem.canonical_solution or "").splitlines():
            line = line.strip()
            if len(line) >= 12 and line not in problem.prompt:
                assert line not in raw and json.dumps(line)[1:-1] not in encoded, (problem.task_id, line)
    return len(chosen)
