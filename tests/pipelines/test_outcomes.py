"""The outcome contract: every registered pipeline declares the model of its per-problem figures,
returns exactly that model, and a figure it did not declare (or of the wrong type) is an error —
never silently dropped on the way to the result's ``extra``."""

import dspy
import pytest
from pydantic import ValidationError
from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder

from critiquelab.experiments.serving.lm import HarnessLM
from critiquelab.pipelines.baseline import BaselineParams
from critiquelab.pipelines.debate.outcome import DebateOutcome
from critiquelab.pipelines.outcomes import Outcome
from critiquelab.pipelines.registry import create_pipeline, outcome_model, pipeline_names, register_pipeline
from critiquelab.pipelines.solve import solve_and_score
from critiquelab.pipelines.threads import ThreadOutcome
from critiquelab.pipelines.vote.outcome import VoteOutcome
from critiquelab.pipelines.with_memory.outcome import MemoryFigures, with_memory_figures
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool


class _Recording:
    """A pipeline that keeps what it returned, so the test sees the outcome behind the result."""

    def __init__(self, pipeline: dspy.Module) -> None:
        self.pipeline, self.predictions = pipeline, []

    def __call__(self, **inputs):
        prediction = self.pipeline(**inputs)
        self.predictions.append(prediction)
        return prediction


@pytest.fixture(scope="module")
def solved(humaneval_problems):
    """Every registered pipeline with its default params on one problem (scripted LM): the
    prediction it returned and the result the scorer made of it."""
    problem = humaneval_problems[0]
    found = {}
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake, \
            MessagePool() as pool, using_pool(pool):
        lm = HarnessLM("openai/fake", identity="t", cache_dir=None, api_base=fake.api_base, api_key="x",
                       temperature=0.0, max_tokens=400, num_retries=0, seed=0)
        for name in pipeline_names():
            recording = _Recording(create_pipeline(name))
            result = solve_and_score(recording, problem, lm=lm, label=name, seed=0, timeout_s=10.0)
            found[name] = (recording.predictions[0], result)
        lm.close()
    return found


def test_every_registered_pipeline_declares_an_outcome_model():
    for name in pipeline_names():
        model = outcome_model(name)
        assert issubclass(model, Outcome) and model is not Outcome, name
        assert model.model_config["extra"] == "forbid" and model.model_config["strict"], name


def test_a_pipeline_cannot_register_without_an_outcome_model():
    with pytest.raises(TypeError):
        register_pipeline("no_outcome", params=BaselineParams)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="outcome must be an Outcome model"):
        register_pipeline("dict_outcome", params=BaselineParams, outcome=dict)  # type: ignore[arg-type]
    assert {"no_outcome", "dict_outcome"}.isdisjoint(pipeline_names())


def test_each_pipeline_returns_its_declared_model_and_the_result_holds_only_its_figures(solved):
    for name, (prediction, result) in solved.items():
        model = outcome_model(name)
        assert type(prediction.outcome) is model, name
        declared = set(model.model_fields)
        undeclared = [k for k in result.extra if k not in declared and not k.startswith("agent.")]
        assert undeclared == [], name  # per-agent counts are the one flattened figure (agents)
        assert prediction.outcome.figures().items() <= result.extra.items(), name
        for figure, codes in prediction.outcome.codes_to_score.items():  # scored after it returned
            passed = result.extra[figure]
            assert len(passed) == len(codes) and all(type(p) is bool for p in passed), name
        assert ("first_passed" in result.extra) == (prediction.outcome.first_code is not None), name
        outcome = prediction.outcome
        assert (result.iterations, result.parsed, result.thread_id) == (
            outcome.iterations, outcome.parsed, outcome.thread_id)
        for summary in (model.run_metrics, model.table_metrics):  # its summaries read what it stored
            assert all(isinstance(v, int | float) for v in summary([result]).values()), name


def test_an_undeclared_figure_or_a_wrong_type_is_an_error(solved):
    for name, (prediction, _) in solved.items():
        outcome = prediction.outcome
        with pytest.raises(ValidationError, match="undeclared_figure"):
            type(outcome).model_validate({**dict(outcome), "undeclared_figure": 1})
        with pytest.raises(ValueError):
            outcome.undeclared_figure = 1
        with pytest.raises(ValidationError):
            outcome.thread_id = 3  # strict: a number is no thread id
        assert "undeclared_figure" not in outcome.figures(), name


def test_what_the_scorer_fills_must_be_declared():
    with pytest.raises(ValidationError, match="'samples' is no list\\[bool\\] figure of VoteOutcome"):
        VoteOutcome(samples=1, largest_group=1, messages=2, codes_to_score={"samples": ["x"]})  # a count
    with pytest.raises(ValidationError, match="'nodes_passed' is no list"):
        VoteOutcome(samples=1, largest_group=1, messages=2, codes_to_score={"nodes_passed": ["x"]})
    with pytest.raises(ValidationError, match="declares no first_passed"):
        DebateOutcome(consensus=True, final_in_majority=True, agreement=[1.0], judge_decision="chosen",
                      messages=3, unparsed_steps=0, first_code="def f(): pass")
    with pytest.raises(ValidationError, match="'iterations' is no list"):  # not a figure: the result's own
        VoteOutcome(samples=1, largest_group=1, messages=2, codes_to_score={"iterations": []})
    with pytest.raises(ValidationError, match="declares no generated_tests"):
        ThreadOutcome(reviews=0, fixes=0, first_verdict="", final_verdict="", changes_requested=False,
                      stop_reason="no_review", messages=2, unparsed_steps=0, generated_test_code="assert f()")


def test_memory_figures_join_the_pipelines_model_and_are_checked_too(solved):
    outcome = solved["baseline"][0].outcome
    remembered = with_memory_figures(outcome, memory_role_calls=2, memory_visible_passed=True)
    assert isinstance(remembered, ThreadOutcome) and isinstance(remembered, MemoryFigures)
    memory = {"memory_role_calls": 2, "memory_visible_passed": True}
    assert remembered.figures() == {**outcome.figures(), **memory}
    assert remembered.thread_id == outcome.thread_id and remembered.first_code == outcome.first_code
    with pytest.raises(ValidationError, match="memory_typo"):
        with_memory_figures(outcome, memory_typo=1)


def test_solve_rejects_a_prediction_without_a_typed_outcome(humaneval_problems):
    def untyped(**inputs):
        return dspy.Prediction(code="def f(): pass", metrics={"messages": 2})

    with pytest.raises(TypeError, match="returned no typed outcome"):
        solve_and_score(untyped, humaneval_problems[0], lm=None, label="untyped", seed=0, timeout_s=5.0)
