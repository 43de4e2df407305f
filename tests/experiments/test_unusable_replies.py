"""Replies a role could not use are counted per role and warned about (issue #56): an endpoint
that answers every role with a code block (a misconfigured model) leaves every critique unread and
every judge undecided, so a critic loop measures a baseline. The run says so — on screen, on its
MLflow run, in ``compare`` and in ``result.warnings`` — with per-role metrics, whatever form the
broken replies take; ``strict`` refuses to report such a run (exit 3) and the run resumes."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from support.critic_scripts import critic_loop_scripts
from support.fake_openai import FakeOpenAIServer, completion
from support.role_responder import role_of, role_responder
from support.specs import fake_spec

from critiquelab.eval.results import ProblemResult
from critiquelab.eval.scoring import NO_CODE
from critiquelab.eval.verdict import Status
from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.reply_warnings import RefusedToReport, refuse_if_faulty, retry_warnings
from critiquelab.experiments.tracking.store import PARENT_TAG, WARNINGS_TAG, Tracker

FIRST, SECOND = "HumanEval/0", "HumanEval/1"


def _code_only(problems):
    """Every role answered with the problem's solution in a code block, as a model that only ever
    writes code does: right for a coder, no review or verdict for a critic or a judge."""
    by_prompt = {p.prompt.strip(): p for p in problems}

    def respond(messages):
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if "Reply with OK." in text:
            return "OK"
        problem = next((p for key, p in by_prompt.items() if key in text), None)
        return f"```python\n{problem.prompt + problem.canonical_solution if problem else 'pass'}\n```"

    return respond


def _warning(warnings, label):
    (line,) = [w for w in warnings if w.startswith(f"{label} seed 0: ") and "could not use" in w]
    return line


def test_an_endpoint_answering_every_role_with_code_is_counted_and_warned_about(home, humaneval_problems):
    with FakeOpenAIServer(_code_only(humaneval_problems[:2])) as fake:
        spec = fake_spec(fake.api_base, limit=2, pool={"persist": False},
                         pipelines=[{"name": "critic_loop"}, {"name": "debate"}])
        result = run(spec, progress=False)
    critic_loop, debate = result.children
    # Every review unparsed, each a fallback (the loop ends without it); per debate problem 3
    # debaters x 2 rounds unparsed and a judge that could not decide: 7 steps.
    critic_line = _warning(result.warnings, "critic_loop")
    assert ("2 of 2 problems had model replies their role could not use (critic 2 unparsed, 2 "
            "fallbacks taken; 2 of those problems passed)") in critic_line
    debate_line = _warning(result.warnings, "debate")
    assert ("(debater 12 unparsed; judge 2 unparsed, 2 fallbacks taken; 2 of those problems "
            "passed)") in debate_line
    assert critic_loop.metrics["role.critic.unparsed_replies"] == 2
    assert critic_loop.metrics["role.critic.fallbacks"] == 2
    assert critic_loop.metrics["role.coder.unparsed_replies"] == 0  # the coder's code block is its answer
    assert debate.metrics["role.judge.fallbacks"] == 2
    assert debate.metrics["role.debater.unparsed_replies"] == 12
    assert (debate.metrics["unparsed_replies"], debate.metrics["problems_with_unusable_replies"]) == (14, 2)
    assert debate.metrics["reply_retries"] == 14  # DSPy asked each again in JSON
    logged = Tracker(home, "test-experiment").client.get_run(critic_loop.run_id)
    assert critic_line in logged.data.tags[WARNINGS_TAG]
    assert logged.data.metrics["role.critic.unparsed_replies"] == 2
    assert critic_line in result.comparison.notices and debate_line in result.comparison.notices


BROKEN = {  # every role's reply, broken another way than code only; how the coder's reads
    "empty replies": (completion(""), "2 unparsed"),  # DSPy parses no empty reply, not even as code
    # a dict literal parses as Python: the coder's counts as code (it fails the tests), not the critic's
    "JSON with wrong field names": ('{"answer": "looks fine to me", "notes": []}', None),
    "prose": ("I reviewed it and it is fine.", "2 without code"),
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_unusable_replies_are_counted_whatever_form_they_take(broken, home, humaneval_problems):
    reply, coder = BROKEN[broken]
    with FakeOpenAIServer(lambda messages: "OK" if "Reply with OK." in str(messages) else reply) as fake:
        result = run(fake_spec(fake.api_base, limit=2, pool={"persist": False},
                               pipelines=[{"name": "critic_loop"}]), progress=False)
    (child,) = result.children
    # What the coder wrote reviewed, the review unreadable.
    assert child.metrics["role.coder.unparsed_replies"] + child.metrics["role.coder.codeless_replies"] == (
        2 if coder else 0)
    assert child.metrics["role.critic.unparsed_replies"] == 2
    assert child.metrics["role.critic.fallbacks"] == 2
    line = _warning(result.warnings, "critic_loop")
    named = f"coder {coder}; " if coder else ""
    assert f"({named}critic 2 unparsed, 2 fallbacks taken; 0 of those problems passed)" in line


class BreaksOnTheSecond:
    """A healthy critic loop (support.critic_scripts), except that while ``broken`` every role
    asked about the second problem answers with code only."""

    def __init__(self, problems):
        self.healthy = role_responder(critic_loop_scripts(problems))
        self.code_only = _code_only(problems)
        self.second = next(p for p in problems if p.task_id == SECOND).prompt.strip()
        self.broken = True

    def __call__(self, messages):
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if self.broken and self.second in text and role_of(messages) != "coder":
            return self.code_only(messages)
        return self.healthy(messages)


def _parents(home):
    return [r for r in Tracker(home, "test-experiment").runs_tagged({}) if PARENT_TAG not in r.data.tags]


def _checkpointed(home):
    """The task ids of the critic loop's checkpoints, once per line."""
    files = (home / "checkpoints").glob("*/critic_loop__seed0.jsonl")
    return sorted(json.loads(line)["task_id"] for path in files for line in path.read_text().splitlines())


@pytest.mark.parametrize("rerun", ["after fixing the endpoint", "without --strict"])
def test_strict_refuses_to_report_and_the_run_resumes(rerun, tmp_path, home, capsys, humaneval_problems):
    script = BreaksOnTheSecond(humaneval_problems[:2])
    with FakeOpenAIServer(script) as fake:
        path = tmp_path / "spec.yaml"  # one problem at a time: the first is finished before the second
        spec = fake_spec(fake.api_base, limit=2, concurrency=1, pool={"persist": False},
                         pipelines=[{"name": "critic_loop"}])
        path.write_text(yaml.safe_dump(spec))
        assert main(["run", str(path), "--no-progress", "--strict"]) == 3
        out, err = capsys.readouterr()
        (line,) = [entry for entry in err.splitlines() if entry.startswith("critiquelab:")]
        assert line.startswith(f"critiquelab: error: strict: critic_loop seed 0, {SECOND}: replies their "
                               "role could not use (critic 1 unparsed, 1 fallbacks taken); the run stops "
                               "unreported")
        assert "pass@1" not in out  # nothing reported
        (parent,) = _parents(home)
        assert parent.info.status == "KILLED"
        assert _checkpointed(home) == [FIRST]  # the refused problem is not kept: a rerun solves it again
        if rerun == "after fixing the endpoint":
            script.broken = False
            assert main(["run", str(path), "--no-progress", "--strict"]) == 0
            out, err = capsys.readouterr()
            assert "warning" not in err and "pass@1" in out
            assert [p.info.run_id for p in _parents(home)] == [parent.info.run_id]  # resumed
        else:
            assert main(["run", str(path), "--no-progress"]) == 0
            out, err = capsys.readouterr()
            assert ("critiquelab: warning: critic_loop seed 0: 1 of 2 problems had model replies their "
                    "role could not use (critic 1 unparsed, 1 fallbacks taken;") in err
            assert [p.info.run_id for p in _parents(home)] == [parent.info.run_id]  # resumed
            # With strict again, the checkpointed problem is refused too, never reported.
            assert main(["run", str(path), "--no-progress", "--strict"]) == 3
            assert "checkpointed by an earlier run without strict" in capsys.readouterr().err
        assert _checkpointed(home) == [FIRST, SECOND]  # the first problem was not solved again


def _problem(**fields):
    base = {"task_id": "T/0", "pipeline": "critic_loop", "seed": 0, "status": Status.FAILED,
            "reason": "assertion", "lm_calls": 2, "prompt_tokens": 10, "completion_tokens": 5}
    return ProblemResult(**{**base, **fields})


@pytest.mark.parametrize(("fields", "fault"), [
    ({"usage_by_role": {"judge": {"calls": 1, "unparsed_replies": 1, "fallbacks": 1}}},
     "replies their role could not use (judge 1 unparsed, 1 fallbacks taken)"),
    ({"usage_by_role": {"fixer": {"calls": 1, "codeless_replies": 1}}},
     "replies their role could not use (fixer 1 without code)"),
    ({"reason": NO_CODE}, "no code in the model's answer"),
    ({"truncated_replies": 2}, "2 replies stopped at max_tokens"),
    ({"prompt_tokens": 0, "completion_tokens": 0}, "model calls that reported no token usage"),
])
def test_strict_refuses_each_fault_that_makes_a_run_measure_its_endpoint(fields, fault):
    problem = _problem(**fields)
    refuse_if_faulty(False, "critic_loop", 0, [problem])  # without strict: reported, with warnings
    with pytest.raises(RefusedToReport, match=re.escape(f"strict: critic_loop seed 0, T/0: {fault}; ")):
        refuse_if_faulty(True, "critic_loop", 0, [problem])


def test_strict_lets_a_clean_problem_and_a_retried_reply_through():
    # A reply DSPy parsed at its second ask is used: counted and warned about, not refused.
    retried = _problem(usage_by_role={"critic": {"calls": 2, "reply_retries": 1}})
    refuse_if_faulty(True, "critic_loop", 0, [_problem(), retried])
    assert retry_warnings("critic_loop", 0, [retried]) == [
        "critic_loop seed 0: 1 model calls in 1 of 1 problems were DSPy asking again after a reply it "
        "could not parse (critic 1); their tokens are counted with the run's"
    ]
