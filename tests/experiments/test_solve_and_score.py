"""One solve-and-score (issue #58): a run, an optimisation's validation (``evaluate``), TextGrad's
training runs (``run_and_explain``) and the DSPy optimisers' metric (``PassMetric``) score the
same reply the same way — a pass, a syntax error, a timeout, a reply with no code — and a
pipeline that breaks its contract (code not a ``str``) is an error for every one of them."""

from __future__ import annotations

import dspy
import pytest
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, role_responder
from support.specs import fake_spec

from critiquelab.eval.verdict import Status
from critiquelab.experiments.api import run
from critiquelab.optimizers.compile import PassMetric, evaluate, feedback_text
from critiquelab.optimizers.refine import run_and_explain
from critiquelab.pipelines.outcomes import Outcome
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.pipelines.solve import solve_and_score, verdict_of
from critiquelab.signatures.adapter import CodeAdapter

TIMEOUT_S = 1.0
# The coder's reply per problem, and the verdict every scorer must give it.
EXPECTED = {
    "HumanEval/0": (Status.PASSED, ""),
    "HumanEval/1": (Status.FAILED, "syntax"),
    "HumanEval/2": (Status.TIMED_OUT, "timeout"),
    "HumanEval/3": (Status.FAILED, "no_code"),
}


def _coder(problems):
    scripted = ScriptedProblems(problems)

    def coder(text):
        problem = scripted.problem_in(text)
        reply = {
            "HumanEval/0": problem.prompt + (problem.canonical_solution or ""),
            "HumanEval/1": f"def {problem.entry_point}(x):\n    return x +* 2\n",
            "HumanEval/2": problem.prompt + "    while True:\n        pass\n",
        }.get(problem.task_id)
        # No code at all: prose, sent as the raw reply (not a code block).
        return {"code": reply} if reply is not None else "I am not able to write this function."

    return {"coder": coder}


@pytest.fixture
def problems(humaneval_problems):
    return [p for p in humaneval_problems if p.task_id in EXPECTED]


def _lm(api_base):
    return dspy.LM("openai/fake", api_base=api_base, api_key="fake", cache=False, num_retries=0)


def test_a_run_and_every_optimiser_score_the_same_reply_the_same_way(home, problems):
    with FakeOpenAIServer(role_responder(_coder(problems))) as fake:
        spec = fake_spec(fake.api_base, limit=len(problems), pool={"persist": False},
                         execution={"timeout_s": TIMEOUT_S})
        (child,) = run(spec, progress=False).children
        lm = _lm(fake.api_base)
        validation = evaluate(create_pipeline("baseline"), problems, lm=lm, timeout_s=TIMEOUT_S)
        explained = {o.task_id: o for o in run_and_explain(create_pipeline("baseline"), problems, "coder",
                                                           lm=lm, timeout_s=TIMEOUT_S)}
        metric = PassMetric({p.task_id: p for p in problems}, TIMEOUT_S)
        pipeline = create_pipeline("baseline")
        with dspy.context(lm=lm, adapter=CodeAdapter()):  # as the DSPy optimisers run it (compile)
            predictions = {p.task_id: pipeline(prompt=p.prompt, entry_point=p.entry_point, task_id=p.task_id)
                           for p in problems}
        metric_verdicts = {p.task_id: metric.verdict(p, predictions[p.task_id])[1] for p in problems}
    by_problem = {p.task_id: p for p in problems}
    ran = {r.task_id: r for r in child.results}
    assert {task: (r.status, r.reason) for task, r in ran.items()} == EXPECTED
    assert {task: (v.status, v.reason) for task, v in metric_verdicts.items()} == EXPECTED
    assert validation == {task: r.passed for task, r in ran.items()}
    assert child.metrics["pass_at_1"] == sum(validation.values()) / len(validation) == 0.25
    for task, result in ran.items():
        assert explained[task].passed is result.passed
        hidden = feedback_text(by_problem[task], verdict_of(result))
        assert explained[task].feedback.endswith(f"Hidden-test result: {hidden}")


class _NoCode(dspy.Module):
    """A pipeline that breaks the contract: its code is None, not a (possibly empty) str."""

    def forward(self, prompt, entry_point, task_id):
        return dspy.Prediction(code=None, outcome=Outcome())


def test_a_pipeline_returning_no_code_string_is_an_error_for_a_run_and_an_optimiser(problems):
    problem = problems[0]
    lm = _lm("http://127.0.0.1:9")  # never called
    with pytest.raises(TypeError, match="_NoCode returned no code"):
        solve_and_score(_NoCode(), problem, lm=lm, label="none", seed=0, timeout_s=TIMEOUT_S)
    with pytest.raises(TypeError, match="_NoCode returned no code"):
        evaluate(_NoCode(), [problem], lm=lm, timeout_s=TIMEOUT_S)
    with pytest.raises(TypeError, match="returned no code"):
        PassMetric({problem.task_id: problem}).verdict(problem, dspy.Prediction(code=None))
