"""What the viewer tests run: a finished experiment (baseline vs debate on three problems,
scripted LM); one reply carries a <script> tag, debate loses one problem the baseline solves."""

from __future__ import annotations

from support.fake_openai import FakeOpenAIServer, chat_reply
from support.role_responder import ScriptedProblems, role_responder
from support.specs import fake_spec

SCRIPT = "<script>document.title='pwned'</script>"
LOST = "HumanEval/1"  # debate's debaters get this one wrong


def _scripts(problems):
    scripted = ScriptedProblems(problems)

    def debater(text):
        lost = scripted.problem_in(text).task_id == LOST
        return {"argument": "mine handles the empty case",
                "revised_code": scripted.wrong(text) if lost else scripted.solution(text)}

    return {
        "coder": lambda text: {"code": scripted.solution(text) + f"\n# {SCRIPT}\n"},
        "debater": debater,
        "judge": lambda text: chat_reply(choice="1", rationale="solution 1 is simplest", merged_code=""),
    }


def viewer_run(home, problems):
    """Run the experiment into ``home``; returns the runner's result."""
    from critiquelab.experiments.api import run

    pipelines = [{"name": "baseline"}, {"name": "debate", "params": {"debaters": 2, "rounds": 1}}]
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        spec = fake_spec(fake.api_base, pipelines=pipelines, limit=3, pool={"persist": False})
        return run(spec, home=home, progress=False)
