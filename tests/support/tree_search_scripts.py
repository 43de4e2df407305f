"""A scripted tree search whose outcome is known: the coder's code fails the visible examples,
so every problem needs the repairer, which writes the canonical solution (except on the problems
called hopeless); on the problems called solved_by_coder the coder writes it and no repair runs.
The scorer and the path reflector give fixed replies."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from support.fake_openai import chat_reply
from support.role_responder import ScriptedProblems, role_of

SCORE = "6"


def tree_search_responder(
    problems: list[Any], hopeless: Collection[str] = (), solved_by_coder: Collection[str] = (),
) -> Callable[..., str]:
    """A fake-server responder for tree_search's roles. The problem is read from the last message
    only, because a compiled program's demos (earlier turns) show other problems."""
    scripted = ScriptedProblems(problems)

    def repairer(text: str) -> dict[str, str]:
        fixed = scripted.problem_in(text).task_id not in hopeless
        return {"repaired_code": scripted.solution(text) if fixed else scripted.wrong(text)}

    def coder(text: str) -> dict[str, str]:
        solved = scripted.problem_in(text).task_id in solved_by_coder
        return {"code": scripted.solution(text) if solved else scripted.wrong(text)}

    replies = {
        "coder": coder,
        "repairer": repairer,
        "scorer": lambda text: {"assessment": "It may miss an edge case.", "score": SCORE},
        "path_reflector": lambda text: {"reflection": "Implement the body; do not return None."},
    }

    def respond(messages: list[dict[str, Any]]) -> str:
        if "Reply with OK." in json.dumps(messages):  # the serving preflight
            return "OK"
        fields = replies[role_of(messages)](str(messages[-1]["content"]))
        if "Your answer is `" in str(messages[0]["content"]):  # CodeAdapter: a code block
            (code,) = fields.values()
            return f"```python\n{code}\n```"
        return chat_reply(**fields)

    return respond
