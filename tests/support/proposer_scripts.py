"""A scripted prompt / reflection model for the instruction optimisers' tests: it answers every
request of an optimiser's own (MIPROv2's dataset and program summaries and
``proposed_instruction``, GEPA's ``new_instruction``) in the format asked, proposing
:data:`CAREFUL` as the instruction."""

from __future__ import annotations

import json
import re
from typing import Any

from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_of

CAREFUL = "Be CAREFUL to read the whole docstring and handle every case it describes."


def proposer(text: str) -> dict[str, str] | str:
    outputs = text.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
    fields = re.findall(r"\d+\. `(\w+)`", outputs)
    answer = {f: CAREFUL if "instruction" in f else "Python functions from docstrings." for f in fields}
    # GEPA's proposer talks through DSPy's JSONAdapter; MIPROv2's through the context's adapter.
    return json.dumps(answer) if "Outputs will be a JSON object" in text else answer


def roles_asked(server: FakeOpenAIServer) -> set[str]:
    """The roles (``unknown``: an optimiser's own request) of the chat requests ``server`` got."""
    return {role_of(r["messages"]) for r in server.requests if "messages" in r}


def requests_text(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [{"body": json.dumps(r.get("messages", ""))} for r in server.requests]
