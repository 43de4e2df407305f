"""What the viewer tests run: a finished experiment (baseline vs debate on three problems,
scripted LM); one reply carries a <script> tag, debate loses one problem the baseline solves."""

from __future__ import annotations

from support.fake_openai import FakeOpenAIServer, chat_reply
from support.role_responder import role_responder

SCRIPT = "<script>document.title='pwned'</script>"
LOST = "HumanEval/1"  # debate's debaters get this one wrong


def _scripts(problems):
    by_prompt = {p.prompt.strip(): p for p in problems}

    def problem_in(text):
        return next(p for key, p in by_prompt.items() if key in text)

    def right(text, note=""):
        problem = problem_in(text)
        return problem.prompt + problem.canonical_solution + note

    def debater(text):
        problem = problem_in(text)
        code = problem.prompt + "    return None\n" if problem.task_id == LOST else right(text)
        return {"argument": "mine handles the empty case", "revised_code": code}

    return {
        "coder": lambda text: {"code": right(text, f"\n# {SCRIPT}\n")},
        "debater": debater,
        "judge": lambda text: chat_reply(choice="1", rationale="solution 1 is simplest", merged_code=""),
    }


def viewer_run(home, problems):
    """Run the experiment into ``home``; returns the runner's result."""
    from experiments.api import run

    pipelines = [{"name": "baseline"}, {"name": "debate", "params": {"debaters": 2, "rounds": 1}}]
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        spec = {
            "name": "viewer-test", "dataset": {"source": "humaneval", "limit": 3},
            "model": {"id": "openai/fake", "api_base": fake.api_base, "num_retries": 0},
            "pipelines": pipelines, "seeds": [0], "pool": {"persist": False},
        }
        return run(spec, home=home, progress=False)
