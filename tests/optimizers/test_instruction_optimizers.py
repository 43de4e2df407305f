"""MIPROv2 and GEPA compile a pipeline through the real DSPy optimisers against a scripted LM.

The scripted coder only writes correct code when its instruction contains ``CAREFUL``, and the
scripted prompt/reflection model proposes an instruction that does. An optimiser that works
therefore ends with that instruction; one that ignored its proposals, or mutated its input,
fails. Every request the proposers receive is checked for hidden-test lines.
"""

import json

from support.fake_openai import FakeOpenAIServer
from support.proposer_scripts import CAREFUL, proposer, requests_text, roles_asked
from support.role_responder import ScriptedProblems, role_of, role_responder

from critiquelab.optimizers.compile import CompileConfig, compile_program
from critiquelab.optimizers.refine import instruction_of
from critiquelab.optimizers.training_examples import assert_no_hidden_tests
from critiquelab.pipelines.registry import create_pipeline


def _coder(problems):
    scripted = ScriptedProblems(problems)

    def coder(text):
        if CAREFUL in text:
            return {"code": scripted.solution(text)}
        return {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"}

    return coder


def _split(problems):
    return problems[:3], problems[3:5]


def test_mipro_adopts_the_proposed_instruction_that_scores_better(humaneval_problems, make_lm):
    train, val = _split(humaneval_problems)
    program = create_pipeline("baseline")
    before = instruction_of(program, "coder")
    scripts = {"coder": _coder(humaneval_problems), "unknown": proposer}
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        config = CompileConfig("mipro", {"auto": None, "num_candidates": 2, "num_trials": 3,
                                         "max_bootstrapped_demos": 0})
        compiled = compile_program(program, config, train=train, val=val, task_lm=make_lm(fake.api_base))
    assert instruction_of(program, "coder") == before  # the input is untouched
    assert CAREFUL in instruction_of(compiled, "coder")
    proposals = [r for r in fake.requests if "proposed_instruction" in json.dumps(r.get("messages"))]
    assert proposals, "MIPROv2 never asked the prompt model for an instruction"
    assert_no_hidden_tests(requests_text(fake), humaneval_problems)


def test_gepa_reflects_on_sandbox_feedback_and_keeps_the_better_instruction(
    humaneval_problems, make_lm, tmp_path
):
    train, val = _split(humaneval_problems)
    program = create_pipeline("baseline")
    before = instruction_of(program, "coder")
    with FakeOpenAIServer(role_responder({"coder": _coder(humaneval_problems)})) as task, \
            FakeOpenAIServer(role_responder({"unknown": proposer})) as reflection:
        config = CompileConfig("gepa", {"max_metric_calls": 20}, log_dir=tmp_path / "gepa")
        compiled = compile_program(program, config, train=train, val=val, task_lm=make_lm(task.api_base),
                                   teacher_lm=make_lm(reflection.api_base))
    assert instruction_of(program, "coder") == before
    assert instruction_of(compiled, "coder") == CAREFUL
    # Each LM got its own calls: the program's to the task LM, every reflection to the other one.
    assert roles_asked(task) == {"coder"} and roles_asked(reflection) == {"unknown"}
    sent = requests_text(reflection)
    assert sent and any("hidden test assertion failed" in s["body"] for s in sent)
    assert_no_hidden_tests(sent, humaneval_problems)
    assert any((tmp_path / "gepa").iterdir())  # state to resume from


def test_mipro_survives_a_proposal_it_cannot_parse_and_records_it(humaneval_problems, make_lm):
    """The prompt model's second proposal is no answer at all: DSPy raised out of the whole
    compilation; now the current instruction stands in for it, the failure is reported, and the
    search still finds the proposal that did parse."""
    train, val = _split(humaneval_problems)
    proposals, garbage = [], "Sure! Just do your best."  # neither ChatAdapter's fields nor JSON

    def garbling(text):
        if "proposed_instruction" in text.split("Your output fields are:", 1)[1]:
            if "Outputs will be a JSON object" in text:  # the adapter's JSON retry of one proposal
                return garbage if len(proposals) == 2 else proposer(text)
            proposals.append(text)
            if len(proposals) == 2:
                return garbage
        return proposer(text)

    measured = {}
    with FakeOpenAIServer(role_responder({"coder": _coder(humaneval_problems), "unknown": garbling})) as fake:
        config = CompileConfig("mipro", {"auto": None, "num_candidates": 3, "num_trials": 6,
                                         "max_bootstrapped_demos": 0})
        compiled = compile_program(create_pipeline("baseline"), config, train=train, val=val,
                                   task_lm=make_lm(fake.api_base), progress=measured.__setitem__)
    assert len(proposals) == 3
    assert measured["failed_proposals"] == 1.0
    assert CAREFUL in instruction_of(compiled, "coder")


def test_mipro_bootstraps_its_demos_with_the_teacher_and_proposes_with_it(humaneval_problems, make_lm):
    """The teacher (another endpoint) runs the pipeline that bootstraps the demo candidates and
    proposes the instructions; the task LM only runs the trials. Before, MIPROv2 got the teacher
    as prompt model alone and bootstrapped its demos with the task model."""
    train, val = _split(humaneval_problems)
    scripted = ScriptedProblems(humaneval_problems)
    marker = "    # written by the teacher\n"

    def teacher_coder(text):
        return {"code": scripted.solution(text) + marker}

    with FakeOpenAIServer(role_responder({"coder": _coder(humaneval_problems)})) as task, \
            FakeOpenAIServer(role_responder({"coder": teacher_coder, "unknown": proposer})) as teacher:
        config = CompileConfig("mipro", {"auto": None, "num_candidates": 2, "num_trials": 3,
                                         "max_bootstrapped_demos": 1})
        compiled = compile_program(create_pipeline("baseline"), config, train=train, val=val,
                                   task_lm=make_lm(task.api_base), teacher_lm=make_lm(teacher.api_base))
    assert roles_asked(task) == {"coder"} and roles_asked(teacher) == {"coder", "unknown"}
    bootstrapped = [r for r in teacher.requests if "messages" in r and role_of(r["messages"]) == "coder"]
    train_prompts = [p.prompt.strip() for p in train]
    assert all(any(p in r["messages"][-1]["content"] for p in train_prompts) for r in bootstrapped)
    assert CAREFUL in instruction_of(compiled, "coder")
    assert all(marker in d["code"] + "\n" for d in compiled.coder.demos)  # demos are the teacher's
