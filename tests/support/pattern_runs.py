"""What the pattern-panel tests run: scratchpad, architect and tree search on two problems with
a scripted LM. The analyst's approach (a scratchpad value) and tree search's reflections carry a
<script> tag; tree search's first draft is wrong, so it reflects and repairs."""

from __future__ import annotations

import json
import re

from support.fake_openai import FakeOpenAIServer, chat_reply
from support.role_responder import ScriptedProblems, review, role_responder
from support.specs import fake_spec

SCRIPT = "<script>document.title='pwned'</script>"
PATTERN_PIPELINES = [
    {"name": "scratchpad", "params": {"mode": "sequential"}},
    {"name": "architect", "params": {"developers": 2}},
    {"name": "tree_search", "params": {"n": 2, "max_expansions": 3}},
]


def _scripts(problems):
    scripted = ScriptedProblems(problems)
    solution, wrong = scripted.solution, scripted.wrong

    def coder(text):  # scratchpad's coder is right once reviewed; tree search's coder never is
        return {"code": solution(text) if "## reviews" in text else wrong(text)}

    def architect(text):
        entry = re.search(r"\[\[ ## entry_point ## \]\]\n(\w+)", text).group(1)
        task = {"task_id": "main", "function_name": entry, "description": "all"}
        return chat_reply(tasks=json.dumps([task]))

    return {
        "analyst": lambda t: {"approach": f"follow the docstring {SCRIPT}", "edge_cases": '["empty input"]'},
        "coder": coder,
        "critic": lambda t: review("approve") if "return None" not in t.rsplit("## code", 1)[-1]
        else review("request_changes", "returns None"),
        "architect": architect, "developer": lambda t: {"module_code": solution(t)},
        "team_reviewer": lambda t: chat_reply(verdict="approved", findings="[]", summary="fine"),
        "repairer": lambda t: {"repaired_code": solution(t)},
        "path_reflector": lambda t: {"reflection": f"It returns None {SCRIPT}; compute the result."},
    }


def pattern_run(home, problems):
    """Run the three pipelines into ``home``; returns the runner's result."""
    from critiquelab.experiments.api import run

    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        spec = fake_spec(fake.api_base, pipelines=PATTERN_PIPELINES, limit=2, pool={"persist": False})
        return run(spec, home=home, progress=False)
