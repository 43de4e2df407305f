"""benchmarks/export_replay.py: an optimised program's exported messages, sent with a plain HTTP
client, are the harness's own requests byte for byte, so its answers and its pass@1 are the
harness's too (issue #36)."""

import json

import yaml
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems

from benchmarks.export_replay import main
from critiquelab.experiments.api import export, optimize

REPLY = "Here is the code:\n```python\n{code}\n```\nIt handles every case."


def _coder(problems):
    """Answers from the request's last message (earlier ones are demos of other problems): right,
    except for every fourth task number from 3, so that pass@1 is neither 0 nor 1."""
    scripted = ScriptedProblems(problems)

    def respond(messages):
        if "Reply with OK." in str(messages[-1]["content"]):
            return "OK"
        asked = str(messages[-1]["content"])
        number = int(scripted.problem_in(asked).task_id.split("/")[1])
        code = scripted.wrong(asked) if number % 4 == 3 else scripted.solution(asked)
        return REPLY.format(code=code)

    return respond


def _optimise(tmp_path, home, api_base):
    spec = {
        "name": "replay-test",
        "pipeline": {"name": "baseline"},
        "optimizer": {"name": "bootstrap", "params": {"max_bootstrapped_demos": 1}},
        "split": {"seed": 0, "train": 2, "val": 1, "test": "test_half"},
        "dataset": {"source": "humaneval", "split": "dev", "limit": 4},  # test half: HumanEval/1, 3, 5, 7
        "model": {"id": "openai/fake", "api_base": api_base, "num_retries": 0},
    }
    path = tmp_path / "opt.yaml"
    path.write_text(yaml.safe_dump(spec))
    return optimize(path, home=home)


def test_the_replayed_requests_are_the_harness_requests_and_score_alike(tmp_path, home, humaneval_problems,
                                                                        capsys):
    with FakeOpenAIServer(_coder(humaneval_problems)) as fake:
        result = _optimise(tmp_path, home, fake.api_base)
        assert result.kept == "compiled"
        harness = {json.dumps(r) for r in fake.requests}  # as sent: keys in the order sent
        sent = len(fake.requests)
        assert main([result.parent_run_id, "--home", str(home), "--limit", "3"]) == 0
        replayed = fake.requests[sent:]
        exported = tmp_path / "exported"  # what a user has: `critiquelab export RUN`
        export(result.parent_run_id, formats=["json"], out=exported, home=home)
        assert main([str(exported), "--home", str(home), "--limit", "3", "--api-base", fake.api_base,
                     "--model", "fake"]) == 0
        again = fake.requests[sent + len(replayed):]
    assert len(replayed) == 3 and again == replayed
    assert all(json.dumps(r) in harness for r in replayed)
    # The held-out problems, first three, each with the compiled demo before it.
    asked = [ScriptedProblems(humaneval_problems).problem_in(r["messages"][-1]["content"]).task_id
             for r in replayed]
    assert asked == ["HumanEval/1", "HumanEval/3", "HumanEval/5"]
    assert all(len(r["messages"]) == 4 for r in replayed)  # system, demo question and answer, problem
    out = capsys.readouterr().out
    for line in ("requests byte-identical to the harness's: 3/3", "replies identical to the harness's: 3/3",
                 "pass@1 replayed 0.667, harness 0.667", "scored differently: none"):
        assert out.count(line) == 2, out
