"""A scripted critic loop whose outcome is known: a wrong first draft, a critic asking for
changes, a fixer that gets every problem right but one."""

from __future__ import annotations

from support.role_responder import ScriptedProblems, review

HOPELESS = "HumanEval/2"  # the fixer never gets this one right


def critic_loop_scripts(problems):
    """Coder writes a wrong draft, critic asks for changes, fixer writes the canonical solution
    (except for HOPELESS), critic approves code that is no longer a draft."""
    scripted = ScriptedProblems(problems)

    def coder(text):
        return {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"}

    def critic(text):
        code = text.rsplit("code:", 1)[-1]
        return review("request_changes", "a placeholder") if "first draft" in code else review("approve")

    def fixer(text):
        hopeless = scripted.problem_in(text).task_id == HOPELESS
        return {"revised_code": scripted.wrong(text) if hopeless else scripted.solution(text)}

    return {"coder": coder, "critic": critic, "fixer": fixer}
