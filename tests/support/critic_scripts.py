"""A scripted critic loop whose outcome is known: a wrong first draft, a critic asking for
changes, a fixer that gets every problem right but one."""

from __future__ import annotations

from support.role_responder import review

HOPELESS = "HumanEval/2"  # the fixer never gets this one right


def critic_loop_scripts(problems):
    """Coder writes a wrong draft, critic asks for changes, fixer writes the canonical solution
    (except for HOPELESS), critic approves code that is no longer a draft."""
    by_prompt = {p.prompt.strip(): p for p in problems}

    def problem_in(text):
        return next(p for key, p in by_prompt.items() if key in text)

    def coder(text):
        return {"code": problem_in(text).prompt + "    return 'first draft'\n"}

    def critic(text):
        code = text.rsplit("code:", 1)[-1]
        return review("request_changes", "a placeholder") if "first draft" in code else review("approve")

    def fixer(text):
        problem = problem_in(text)
        body = "    return None\n" if problem.task_id == HOPELESS else problem.canonical_solution
        return {"revised_code": problem.prompt + body}

    return {"coder": coder, "critic": critic, "fixer": fixer}
