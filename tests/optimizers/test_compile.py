"""Compilation: BootstrapFewShot over a scripted critic loop; demos from pool traces."""

from support.critic_scripts import HOPELESS, critic_loop_scripts
from support.fake_openai import FakeOpenAIServer
from support.role_responder import role_responder

from critiquelab.eval.verdict import Status, Verdict
from critiquelab.optimizers.compile import CompileConfig, attach_trace_demos, compile_program, feedback_text
from critiquelab.optimizers.training_examples import TaskOutcome, label_thread
from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.pool.messages import Message


def test_bootstrap_yields_demos_from_passing_runs_and_leaves_the_input_untouched(humaneval_problems, make_lm):
    train = humaneval_problems[:3]
    program = create_pipeline("critic_loop", max_iterations=2)
    with FakeOpenAIServer(role_responder(critic_loop_scripts(humaneval_problems))) as fake:
        compiled = compile_program(
            program, CompileConfig("bootstrap", {"max_bootstrapped_demos": 3}), train=train,
            task_lm=make_lm(fake.api_base),
        )
    assert compiled is not program
    assert all(p.demos == [] for _, p in program.named_predictors())  # input untouched
    demos = {name: p.demos for name, p in compiled.named_predictors()}
    assert set(demos) == {"coder", "critic", "fixer"}
    assert demos["fixer"] and demos["critic"]
    assert demos["coder"] == []  # every first draft failed the hidden tests (see test_demo_filter)
    hopeless = next(p for p in humaneval_problems if p.task_id == HOPELESS)
    for name, predictor in compiled.named_predictors():
        for demo in predictor.demos:
            assert set(demo.keys()) - {"augmented"} <= set(predictor.signature.fields), name
            assert hopeless.prompt not in str(demo.get("prompt")), "a failing run became a demo"
    fixes = [d["revised_code"] for d in demos["fixer"]]
    assert all("return None" not in code for code in fixes)
    # DSPy keeps one demo per predictor per successful example (the critic ran twice per task).
    assert len(demos["critic"]) == 2
    assert {str(d["verdict"]) for d in demos["critic"]} <= {"request_changes", "approve"}


def _message(intent, content, trace, **metadata):
    return Message(task_id="T", thread_id="t", intent=intent, sender="x", content=content,
                   run_id="r", metadata={"trace": trace, **metadata})


def test_trace_demos_only_from_successful_calls_with_signature_fields():
    def coder_call(code):
        return {"role": "coder", "inputs": {"prompt": "def f():"}, "outputs": {"code": code}, "parsed": True}

    passing = _message("output.complete", "good", coder_call("good"))
    failing_history = [_message("output.complete", "bad", coder_call("bad"))]
    traces = label_thread([passing], TaskOutcome(passed=True)) + label_thread(
        failing_history, TaskOutcome(passed=False)
    )
    program = create_pipeline("critic_loop")
    compiled = attach_trace_demos(program, traces, k=5)
    assert [dict(d) for d in compiled.coder.demos] == [{"prompt": "def f():", "code": "good"}]
    assert compiled.critic.demos == [] and program.coder.demos == []


def test_gepa_feedback_redacts_hidden_test_lines(humaneval_problems):
    problem = humaneval_problems[0]
    secret = next(line.strip() for line in problem.test.splitlines() if "assert" in line)
    verdict = Verdict(status=Status.FAILED, reason="syntax", detail=f"SyntaxError at {secret}")
    text = feedback_text(problem, verdict)
    assert "does not compile" in text and secret not in text and "<hidden test>" in text


def test_feedback_never_carries_what_a_hidden_test_passed_the_code(humaneval_problems):
    """A candidate that raises its arguments (here what the sandbox reports for
    ``raise ValueError(repr(locals()))`` on HumanEval/0's first hidden call) or a message made
    while the test ran: only the exception's type reaches the reflection LM."""
    problem = humaneval_problems[0]
    leaked = "{'numbers': [1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 'threshold': 0.3}"
    for reason, detail in [("exception", f"ValueError: {leaked}"), ("assertion", f"AssertionError: {leaked}"),
                           ("unsupported_return", leaked)]:
        text = feedback_text(problem, Verdict(status=Status.FAILED, reason=reason, detail=detail))
        assert "3.9" not in text and "threshold" not in text, text
    exception = feedback_text(problem, Verdict(status=Status.FAILED, reason="exception",
                                               detail=f"ValueError: {leaked}"))
    assert exception == "The final code fails the hidden tests: it raised an exception. (ValueError)"
