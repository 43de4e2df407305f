"""Pipelines with memory through the runner, against a scripted LM: injection in later requests,
reflection entries, metrics, no hidden test in any entry or request, memory off unchanged, the
warm-start split rule, reflexion, and the `critiquelab memory` commands."""

import json
import re

import pytest
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, role_responder
from support.specs import fake_spec

from critiquelab.core.errors import UserError
from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.memory.bank import MemoryBank
from critiquelab.runtime.memory.episodic import stored_collections

LESSON = "Check the boundary cases named in the docstring before returning."
# Tests of reflections, promotion and curation keep the thread's other entries (decisions, code
# patterns) out, so their counts are the reflector's alone.
MINED_ONLY = ["error_pattern", "review_feedback"]


def _scripts(problems, *, wrong=()):
    """The coder solves every problem except those in ``wrong`` (until a reflection is shown)."""

    scripted = ScriptedProblems(problems)

    def coder(text):
        fails = scripted.problem_in(text).task_id in wrong and "[this task, attempt" not in text
        return {"code": scripted.wrong(text) if fails else scripted.solution(text)}

    def reflector(text):
        return {"what_went_wrong": "nothing", "what_worked": "reading the examples",
                "pattern": "boundary cases", "lesson": LESSON}

    return {"coder": coder, "reflector": reflector}


def _hidden_lines(problems):
    return {p.task_id: [line.strip() for line in p.test.splitlines()
                        if len(line.strip()) >= 12 and line.strip() not in p.prompt] for p in problems}


def _assert_no_hidden_test(texts, problems):
    for task_id, lines in _hidden_lines(problems).items():
        for line in lines:
            for text in texts:
                assert line not in text and json.dumps(line)[1:-1] not in text, (task_id, line)


def test_memory_on_injects_earlier_lessons_and_never_leaks_hidden_tests(home, humaneval_problems):
    problems = humaneval_problems[:4]
    memory = {"enabled": True, "approval": "auto", "record": MINED_ONLY}
    pipelines = [{"name": "baseline", "label": "baseline+memory", "memory": memory}]
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=4), progress=False)
        requests = list(fake.requests)
    child = result.children[0]
    assert child.metrics["pass_at_1"] == 1.0
    coder_requests = [r for r in requests if "Your answer is `code`" in r["messages"][0]["content"]]
    assert len(coder_requests) == 4
    assert all("memories" in r["messages"][0]["content"] for r in coder_requests)
    first_user = coder_requests[0]["messages"][-1]["content"]
    last_user = coder_requests[-1]["messages"][-1]["content"]
    assert "memories:\nnone" in first_user  # nothing learned yet
    injected = re.findall(r"\[(m-[0-9a-f]+)\] boundary cases: " + re.escape(LESSON), last_user)
    assert len(injected) == 3  # k=3 lessons of the three earlier tasks
    assert child.metrics["memory.reuse_rate"] == 0.75  # 3 of 4 coder calls got another task's lesson
    assert child.metrics["memory.entries_written"] == child.metrics["memory.entries"] == 4
    assert child.metrics["memory.redundancy"] == 1.0  # the scripted reflector repeats one lesson
    assert child.metrics["memory.recall_probes"] == 4

    client = MlflowClient(tracking_uri(home))
    log = client.download_artifacts(child.run_id, "messages.jsonl")
    with open(log) as lines:
        messages = [json.loads(line) for line in lines]
    traces = [m["metadata"]["trace"] for m in messages if m["intent"] == "output.complete"]
    # The third identical lesson promoted a skill (promote_after 3), injected at once (approval auto).
    assert [len(t.get("memory_ids", [])) for t in traces] == [0, 1, 2, 4]
    assert child.metrics["memory.skills_promoted"] == 1
    assert sum(m["intent"] == "reflection" for m in messages) == 4

    with MemoryBank(home) as bank:
        entries = bank.episodic.all()
    assert {e.run_id for e in entries} == {child.run_id} and len(entries) == 4
    assert set(injected) <= {e.id for e in entries}
    texts = [json.dumps(r) for r in requests] + [e.model_dump_json() for e in entries]
    _assert_no_hidden_test(texts, problems)


def test_memory_off_sends_the_requests_of_a_run_without_memory(home, humaneval_problems):
    """Left out or disabled, memory changes no request (same bytes), so cached answers replay."""
    bodies = {}
    scripted = ScriptedProblems(humaneval_problems)
    for name, extra in (("absent", {}), ("disabled", {"memory": {"enabled": False, "k": 5}})):
        pipelines = [{"name": "critic_loop", **extra}]
        with FakeOpenAIServer(role_responder({
            "coder": lambda t: {"code": scripted.problem_in(t).prompt + "    return 1\n"},
            "critic": lambda t: {"verdict": "approve", "findings": "[]", "summary": "fine"},
        })) as fake:
            spec = fake_spec(fake.api_base, pipelines=pipelines, limit=2)
            run(spec, progress=False, fresh=True, cache=False)
            bodies[name] = [json.dumps(r["messages"]) for r in fake.requests
                            if "Reply with OK." not in json.dumps(r["messages"])]  # the start-up check
    # As multisets: two problems are solved at once (the default concurrency), in either order.
    assert sorted(bodies["absent"]) == sorted(bodies["disabled"]) and len(bodies["absent"]) == 4
    assert not any("memories" in body for body in bodies["absent"])


def test_warm_start_refuses_to_score_on_the_problems_it_learned_on(home, humaneval_problems):
    problems = humaneval_problems[:3]
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        learned = run(fake_spec(fake.api_base, limit=2, pipelines=[
            {"name": "baseline", "memory": {"enabled": True}}]), progress=False)
        warm = {"enabled": True, "warm_start": learned.children[0].run_id}
        memory = home / "memory"
        before = {p: p.read_bytes() for p in memory.rglob("*") if p.is_file()}
        overlapping = fake_spec(fake.api_base, limit=3, pipelines=[{"name": "baseline", "memory": warm}])
        with pytest.raises(UserError, match=r"memory.warm_start: 2 problem\(s\) to score were used to build"):
            run(overlapping, progress=False)
        elsewhere = fake_spec(fake.api_base, limit=3, pipelines=[
            {"name": "baseline", "memory": {**warm, "store": "other"}}])
        with pytest.raises(UserError, match=r"memory.warm_start: run '[0-9a-f]+' wrote no memory in "
                                            r"store 'other'"):
            run(elsewhere, progress=False)
        # refused, both left the store byte for byte as it was (no store created, no open recorded)
        assert {p: p.read_bytes() for p in memory.rglob("*") if p.is_file()} == before
        disjoint = fake_spec(fake.api_base, pipelines=[{"name": "baseline", "memory": warm}],
                             dataset={"source": "humaneval", "task_ids": [problems[2].task_id]})
        result = run(disjoint, progress=False)
        last_user = fake.requests[-2]["messages"][-1]["content"]  # the coder's, before the reflector's
    assert result.children[0].metrics["pass_at_1"] == 1.0
    assert LESSON in last_user  # recalled from the warm-start run


def test_reflexion_retries_with_its_reflection(home, humaneval_problems):
    problems = humaneval_problems[:2]
    wrong = {problems[0].task_id}
    with FakeOpenAIServer(role_responder(_scripts(problems, wrong=wrong))) as fake:
        result = run(fake_spec(fake.api_base, pipelines=[{"name": "reflexion"}], limit=2), progress=False)
        requests = [r for r in fake.requests if "Reply with OK." not in json.dumps(r)]  # start-up check
    child = result.children[0]
    assert child.metrics["pass_at_1"] == 1.0 and child.metrics["first_pass_at_1"] == 0.5
    retry = [r for r in requests if "[this task, attempt 1]" in r["messages"][-1]["content"]]
    assert len(retry) == 1 and LESSON in retry[0]["messages"][-1]["content"]
    assert len(requests) == 4  # first problem: attempt, reflection, retry; second: one attempt
    _assert_no_hidden_test([json.dumps(r) for r in requests], problems)


def test_memory_commands_show_and_curate_what_agents_learned(home, humaneval_problems, capsys):
    problems = humaneval_problems[:3]
    memory = {"enabled": True, "promote_after": 2, "share_to": {"coder": ["fixer"]}, "record": MINED_ONLY}
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        spec = fake_spec(fake.api_base, pipelines=[{"name": "baseline", "memory": memory}], limit=3)
        run(spec, progress=False)
    capsys.readouterr()
    assert main(["memory", "proposals"]) == 0
    proposals = re.findall(r"^(p-[0-9a-f]+)\s+coder -> fixer", capsys.readouterr().out, re.MULTILINE)
    assert len(proposals) == 3
    assert main(["memory", "skills"]) == 0
    listed = capsys.readouterr().out
    [skill] = re.findall(r"^(s-[0-9a-f]+)\s+coder\s+reflection\s+pending", listed, re.MULTILINE)
    assert main(["memory", "approve", skill]) == 0 and main(["memory", "approve", proposals[0]]) == 0
    assert main(["memory", "reject", proposals[1]]) == 0
    capsys.readouterr()
    assert main(["memory", "proposals"]) == 0
    assert re.findall(r"^(p-[0-9a-f]+)", capsys.readouterr().out, re.MULTILINE) == [proposals[2]]
    assert main(["memory", "skills"]) == 0 and "approved" in capsys.readouterr().out
    assert main(["memory", "search", "boundary cases", "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count(LESSON) == 2
    assert main(["memory", "consolidate"]) == 0
    assert "merged 2" in capsys.readouterr().out  # three identical lessons become one
    assert main(["memory", "approve", "p-nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no proposal 'p-nope'" in err
    assert main(["memory", "search", "x", "--type", "lesson"]) == 2
    chroma = home / "memory" / "chroma"
    stores = stored_collections(chroma)
    files = {p: p.read_bytes() for p in chroma.rglob("*") if p.is_file()}
    assert main(["memory", "search", "x", "--store", "never_written"]) == 2
    assert "no memory store 'never_written'" in capsys.readouterr().err
    assert stored_collections(chroma) == stores  # refused: none was created
    # ... and nothing written: no client opened the store (an open writes to chroma.sqlite3)
    assert {p: p.read_bytes() for p in chroma.rglob("*") if p.is_file()} == files
    assert main(["memory", "forget", "--before", "yesterday"]) == 2
    assert main(["memory", "forget", "--before", "2000-01-01"]) == 0
    assert "forgot 0 entries" in capsys.readouterr().out


@pytest.mark.parametrize(("memory", "expected"), [
    ({"enabled": "yes"}, "pipelines.0.memory.enabled: expected true or false"),
    ({"k": 0}, "pipelines.0.memory.k: must be >= 1 (got 0)"),
    ({"approval": "maybe"}, "pipelines.0.memory.approval: must be one of manual, auto (got 'maybe')"),
    ({"store": "../x"}, "pipelines.0.memory.store: String should match pattern"),
    ({"record": ["reflection"]},
     "pipelines.0.memory.record.0: must be one of error_pattern, review_feedback, decision_outcome, "
     "code_pattern (got 'reflection')"),
    ({"skills_max_distance": 3}, "pipelines.0.memory.skills_max_distance: must be <= 2.0 (got 3)"),
    ({"kk": 1}, "pipelines.0.memory.kk: unknown field; allowed: enabled,"),
    ({"roles": ["coderr"]}, "pipelines.0.memory: roles: unknown role 'coderr'; memory reaches: coder, fixer"),
    ({"share_to": {"critic": ["coder", "fxer"]}},
     "pipelines.0.memory: share_to.critic: unknown role 'fxer' (it would never recall what is shared)"),
    ({"promote_distance": float("nan")},
     "pipelines.0.memory.promote_distance: expected a finite number, got nan"),
    ({"enabled": True, "warm_start": "abc"}, "pipeline 'baseline': memory.warm_start: this data directory "
                                             "holds no memory"),
])
def test_bad_memory_config_is_one_line_and_exit_2_before_anything_is_written(tmp_path, capsys, home,
                                                                            memory, expected):
    import yaml

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "x", "dataset": {"limit": 1},
                                    "pipelines": [{"name": "baseline", "memory": memory}]}))
    code = main(["--home", str(home), "run", str(spec)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err
    assert not home.exists()


def test_seeded_orderings_and_compare_shows_learning_curves_and_memory_metrics(home, humaneval_problems):
    problems = humaneval_problems[:4]
    pipelines = [{"name": "baseline"},
                 {"name": "baseline", "label": "baseline+memory", "memory": {"enabled": True}}]
    with FakeOpenAIServer(role_responder(_scripts(problems))) as fake:
        spec = fake_spec(fake.api_base, pipelines=pipelines, limit=4, order_seed=7, seeds=[0, 1])
        result = run(spec, progress=False)
    comparison = result.comparison
    by_run = {(c.pipeline, c.seed): [r.task_id for r in c.results] for c in result.children}
    assert by_run[("baseline", 0)] == by_run[("baseline+memory", 0)] != by_run[("baseline", 1)]
    assert sorted(by_run[("baseline", 1)]) == sorted(p.task_id for p in problems)
    frame = comparison.problems
    assert list(frame[(frame.pipeline == "baseline") & (frame.seed == 1)].task_id) == by_run[("baseline", 1)]
    assert comparison.files["learning_curve"].stat().st_size > 0
    assert "## Memory" in comparison.markdown and "baseline+memory | 1 | 0.750" in comparison.markdown
    assert "| baseline | 4 | 4 | 1.000 | 1.000 |" in comparison.markdown
    # The slope test against the baseline over both orderings: both solve everything, no difference.
    assert "| baseline+memory | baseline | 2 | 2 | +0.000 | +0.000 | +0.000 | +0.000, +0.000 | – | 1.000 |" \
        in comparison.markdown
    assert comparison.files["learning_slope"].read_text().startswith("pipeline,reference,orderings")
    page = comparison.files["html"].read_text()  # the same section in the report, before Method
    assert page.index("<h2>Memory</h2>") < page.index("Method")
    assert "baseline+memory" in page[page.index("<h2>Memory</h2>"):page.index("Method")]


def test_critic_findings_reach_the_coder_and_fixer_of_later_tasks(home, humaneval_problems):
    """Cross-agent sharing: the critic's finding and the fix that followed (mined from the
    thread) are proposed to the coder and fixer, approved automatically, and injected into their
    calls on the next problem; the critic itself gets no memories field."""
    from support.role_responder import review

    problems = humaneval_problems[:2]
    scripted = ScriptedProblems(problems)

    def coder(text):
        return {"code": scripted.problem_in(text).prompt + "    return 'first draft'\n"}

    def critic(text):
        code = text.rsplit("[[ ## code ## ]]", 1)[-1]
        return review("request_changes", "returns a placeholder string") if "first draft" in code \
            else review("approve")

    def fixer(text):
        return {"revised_code": scripted.solution(text)}

    scripts = {"coder": coder, "critic": critic, "fixer": fixer, "reflector": _scripts(problems)["reflector"]}
    # k=6: every entry of the first task fits, so the critic's finding reaches the coder whatever
    # its rank beside the task's code pattern and decisions.
    memory = {"enabled": True, "approval": "auto", "k": 6}
    pipelines = [{"name": "critic_loop", "params": {"execution_feedback": True}, "memory": memory}]
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=2), progress=False)
        requests = [json.dumps(r["messages"]) for r in fake.requests]
    assert result.children[0].metrics["pass_at_1"] == 1.0
    with MemoryBank(home) as bank:
        first = [e for e in bank.episodic.all() if e.task_id == problems[0].task_id]
        proposals = bank.proposals.list(status="approved")
    kinds = sorted((e.role, e.type) for e in first)
    assert kinds == [("critic", "decision_outcome"), ("critic", "error_pattern"),
                     ("critic", "review_feedback"), ("fixer", "code_pattern"),
                     ("fixer", "decision_outcome"), ("fixer", "reflection")]
    decided = {e.role: e for e in first if e.type == "decision_outcome"}
    assert "Decision: the fixer revised the code after a review (returns a placeholder string" \
        in decided["fixer"].content
    assert decided["critic"].context["decision"] == "approve" and decided["critic"].context["visible_passed"]
    solved = next(e for e in first if e.type == "code_pattern")
    assert solved.content.startswith(f"Solved '{problems[0].entry_point}: ")
    with MemoryBank(home) as bank:
        _assert_no_hidden_test([e.model_dump_json() for e in bank.episodic.all()], problems)
    pattern = next(e for e in first if e.type == "error_pattern")
    assert pattern.content.startswith("Mistake: returns a placeholder string")
    assert "Outcome: the visible examples then passed." in pattern.content
    assert sorted(pattern.audience) == ["coder", "critic", "fixer"]
    assert {(p.from_role, p.to_role) for p in proposals} >= {("critic", "coder"), ("critic", "fixer")}
    second_coder = next(r for r in requests
                        if "Your answer is `code`" in r and f"def {problems[1].entry_point}" in r)
    assert f"[{pattern.id}] Mistake: returns a placeholder string" in second_coder
    assert not any("memories" in r for r in requests if "`verdict`" in r)
    assert result.children[0].metrics["memory.reuse_rate"] > 0


def test_debate_judge_choice_is_remembered_with_its_visible_outcome(home, humaneval_problems):
    """The proposers' drafts fail, the debaters' revisions pass, the judge picks one: a
    decision_outcome of the judge (passed) and a code_pattern of the chosen code, no hidden test
    in either."""
    problems = humaneval_problems[:1]
    problem = problems[0]

    def debater(text):
        return {"argument": "mine handles the examples",
                "revised_code": problem.prompt + problem.canonical_solution}

    def judge(text):
        return {"choice": "2", "rationale": "solution 2 passes the examples", "merged_code": ""}

    scripts = {"coder": lambda text: {"code": problem.prompt + "    return None\n"}, "debater": debater,
               "judge": judge, "reflector": _scripts(problems)["reflector"]}
    pipelines = [{"name": "debate", "params": {"debaters": 2, "rounds": 1}, "memory": {"enabled": True}}]
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        run(fake_spec(fake.api_base, pipelines=pipelines, limit=1), progress=False)
    with MemoryBank(home) as bank:
        entries = bank.episodic.all()
    [decision] = [e for e in entries if e.type == "decision_outcome"]
    assert (decision.role, decision.context["decision"], decision.context["visible_passed"]) == \
        ("judge", "choose", True)
    assert decision.content.endswith("Decision: the judge chose one candidate (solution 2 passes the "
                                     "examples). Outcome: the visible examples passed.")
    assert decision.content.startswith(f"On '{decision.context['task_summary']}': ")
    [solved] = [e for e in entries if e.type == "code_pattern"]
    assert solved.content.startswith(f"Solved '{problem.entry_point}: ") and '"""' not in solved.content
    _assert_no_hidden_test([e.model_dump_json() for e in entries], problems)
