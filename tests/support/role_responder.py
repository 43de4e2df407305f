"""Script a fake LM by role: the role is recognised from the output fields DSPy asks for."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from support.fake_openai import HttpError, chat_reply

RoleScript = Callable[[str], dict[str, str] | str | HttpError]

# Output field that identifies each role's signature in the system message (ChatAdapter's
# "Your output fields are: …", or CodeAdapter's "Your answer is `…`").
# Two pipelines may name a role alike (the architect team's and the SOP line's "architect"), so
# this is a list of (role, marker) pairs, tried in order.
ROLE_MARKERS: tuple[tuple[str, str], ...] = (
    ("architect", "`tasks`"),
    ("developer", "`module_code`"),
    ("team_reviewer", "'changes_requested'"),
    ("analyst", "`edge_cases`"),
    ("judge", "`choice`"),
    ("debater", "`argument`"),
    ("critic", "`verdict`"),
    ("fixer", "`revised_code`"),
    ("meta_critic", "`wrong_findings`"),
    ("self_feedback", "`is_correct`"),
    ("repairer", "`repaired_code`"),
    ("scorer", "`score`"),
    ("path_reflector", "`reflection`"),
    ("reflector", "`lesson`"),
    ("test_writer", "`test_code`"),
    ("product_manager", "`spec`"),
    ("architect", "`design`"),
    ("engineer", "`implementation_code`"),
    ("qa_engineer", "`acceptance_test_code`"),
    ("task_specifier", "`specified_task`"),
    ("instructor", "`task_done`"),
    ("assistant", "`solution_code`"),
    ("input_writer", "`inputs`"),
    ("pairwise_judge", "`right_output`"),
    ("coder", "`code`"),
)


def role_of(messages: list[dict[str, Any]]) -> str:
    system = str(messages[0].get("content", "")) if messages else ""
    if "Your answer is `" in system:
        outputs = system.split("Your answer is ", 1)[1]
    else:
        outputs = system.split("Your output fields are:", 1)[-1].split("All interactions", 1)[0]
    for role, marker in ROLE_MARKERS:
        if marker in outputs:
            return role
    return "unknown"


def role_responder(scripts: dict[str, RoleScript], *, with_body: bool = False) -> Callable[..., str]:
    """``scripts[role](full_request_text)`` returns the output fields (or a raw string); with
    ``with_body``, ``scripts[role](text, request_body)`` (for use with ``pass_body=True``)."""

    def respond(messages: list[dict[str, Any]], body: dict[str, Any] | None = None) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if "Reply with OK." in text:
            return "OK"
        role = role_of(messages)
        reply = scripts[role](text, body) if with_body else scripts[role](text)
        if isinstance(reply, str | HttpError):
            return reply
        if "Your answer is `" in str(messages[0].get("content", "")):  # CodeAdapter: a code block
            (code,) = reply.values()
            return f"Here is the code:\n```python\n{code}\n```"
        return chat_reply(**reply)

    return respond


def review(verdict: str, *findings: str) -> dict[str, str]:
    items = [
        {"severity": "major", "category": "bug", "line": None, "description": f, "suggestion": "fix it"}
        for f in findings
    ]
    return {"verdict": verdict, "findings": json.dumps(items), "summary": f"{verdict} review"}


class ScriptedProblems:
    """The problem a scripted role is asked about (found by its prompt in the request) and the
    code a script answers with: the canonical solution, or a wrong body."""

    def __init__(self, problems: list[Any]) -> None:
        self._by_prompt = {p.prompt.strip(): p for p in problems}

    def problem_in(self, text: str) -> Any:
        return next(p for key, p in self._by_prompt.items() if key in text)

    def solution(self, text: str) -> str:
        problem = self.problem_in(text)
        return problem.prompt + problem.canonical_solution

    def wrong(self, text: str) -> str:
        return self.problem_in(text).prompt + "    return None\n"
