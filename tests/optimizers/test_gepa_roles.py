"""GEPA on tree search's repairer alone, with a reflection LM of its own (issue #36).

The scripted repairer fixes the code only when its instruction says CAREFUL, which the scripted
reflection LM proposes. With ``roles: [repairer]`` every reflection must be about the repairer:
GEPA's own round robin would start with the coder, whose new instruction is then thrown away.
"""

from support.fake_openai import FakeOpenAIServer
from support.proposer_scripts import CAREFUL, proposer, roles_asked
from support.role_responder import ScriptedProblems, role_of, role_responder
from support.tree_search_scripts import tree_search_responder

from critiquelab.optimizers.compile import CompileConfig, compile_program
from critiquelab.optimizers.refine import instruction_of
from critiquelab.pipelines.tree_search.pipeline import TreeSearch, TreeSearchParams

SEARCH = {"n": 2, "max_expansions": 2, "evaluation": "lm", "parallel_agents": 1}
REPAIRER_WORDS = "debugging your own code"  # in the repairer's instruction only
CODER_WORDS = "Implement the function described by the prompt"  # in the coder's only


def _search_that_needs_a_careful_repairer(problems):
    scripted, search = ScriptedProblems(problems), tree_search_responder(problems)

    def respond(messages):
        if role_of(messages) == "repairer" and CAREFUL not in str(messages[0]["content"]):
            return f"```python\n{scripted.wrong(str(messages[-1]['content']))}\n```"
        return search(messages)

    return respond


def test_gepa_with_roles_reflects_on_the_repairer_only_with_its_reflection_lm(
    humaneval_problems, make_lm, tmp_path
):
    train, val = humaneval_problems[:3], humaneval_problems[3:5]
    program = TreeSearch(TreeSearchParams(**SEARCH))
    with FakeOpenAIServer(_search_that_needs_a_careful_repairer(humaneval_problems)) as task, \
            FakeOpenAIServer(role_responder({"unknown": proposer})) as reflection:
        config = CompileConfig("gepa", {"max_metric_calls": 16}, log_dir=tmp_path / "gepa",
                               roles=("repairer",))
        compiled = compile_program(program, config, train=train, val=val, task_lm=make_lm(task.api_base),
                                   teacher_lm=make_lm(reflection.api_base))
    assert roles_asked(reflection) == {"unknown"}
    assert roles_asked(task) == {"coder", "repairer", "path_reflector"}  # λ 0: no scorer call
    reflections = [str(r["messages"]) for r in reflection.requests if "messages" in r]
    assert reflections and all(REPAIRER_WORDS in r and CODER_WORDS not in r for r in reflections)
    assert instruction_of(compiled, "repairer") == CAREFUL
    for role in ("coder", "scorer", "path_reflector"):
        assert instruction_of(compiled, role) == instruction_of(program, role)
