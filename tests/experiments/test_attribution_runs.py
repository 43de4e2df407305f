"""Failure attribution through a run and compare: scripted problems built to land in each place —
a critic loop's six, vote's three — are counted there in compare's tables, listed per problem in
problems.csv, linked to their transcripts in report.html and logged as MLflow metrics; the
baseline, which neither revises nor chooses, is not attributed."""

from __future__ import annotations

import re
from collections import defaultdict

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, review, role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri

# HumanEval/N of the critic loop -> where it is built to end
CRITIC_LOOP = {0: "kept_passing", 1: "revision_broke", 2: "critic_miss", 3: "echo", 4: "repair_miss",
               5: "fixed"}
# HumanEval/N of vote (three samples) -> which samples are right
VOTE = {0: (False, False, False), 1: (False, False, True)}  # the others: every sample right


def _scripts(problems):
    scripted = ScriptedProblems(problems)
    seeds: dict[str, list[int]] = defaultdict(list)

    def number(text):
        return int(scripted.problem_in(text).task_id.split("/")[1])

    def wrong(text, body="    return None\n"):
        return scripted.problem_in(text).prompt + body

    def coder(text, body):
        n = number(text)
        if body.get("temperature", 0) > 0:  # a vote sample: right or wrong by its place among the samples
            order = seeds[scripted.problem_in(text).task_id]
            order.append(body["seed"]) if body["seed"] not in order else None
            right = VOTE.get(n, (True, True, True))[order.index(body["seed"])]
            return {"code": scripted.solution(text) if right else wrong(text)}
        return {"code": scripted.solution(text) if CRITIC_LOOP[n] in ("kept_passing", "revision_broke")
                else wrong(text)}

    def critic(text, body):
        if CRITIC_LOOP[number(text)] in ("kept_passing", "critic_miss"):
            return review("approve")
        return review("request_changes", "this is wrong")

    def fixer(text, body):
        end = CRITIC_LOOP[number(text)]
        if end == "fixed":
            return {"revised_code": scripted.solution(text)}
        if end == "echo":  # the draft again, with a comment and a blank line: no change the tests see
            return {"revised_code": wrong(text, "    # checked every case\n\n    return None\n")}
        return {"revised_code": wrong(text, "    return 0\n")}

    return {"coder": coder, "critic": critic, "fixer": fixer}


@pytest.fixture(scope="module")
def attributed(tmp_path_factory, humaneval_problems):
    home = tmp_path_factory.mktemp("attribution") / "home"
    pipelines = [
        {"name": "baseline"},
        {"name": "critic_loop", "params": {"max_iterations": 1}},
        {"name": "vote", "params": {"k": 3, "parallel_agents": 1}},
    ]
    responder = role_responder(_scripts(humaneval_problems), with_body=True)
    with pytest.MonkeyPatch.context() as patch, FakeOpenAIServer(responder, pass_body=True) as fake:
        patch.setenv("CRITIQUELAB_HOME", str(home))
        result = run(fake_spec(fake.api_base, pipelines=pipelines, limit=6), progress=False)
    return home, result


def test_each_scripted_problem_lands_where_it_was_built_to(attributed):
    _, result = attributed
    problems = pd.read_csv(result.comparison.out_dir / "problems.csv")
    loop = problems[problems["pipeline"] == "critic_loop"].set_index("task_id")["attribution"]
    assert loop.to_dict() == {f"HumanEval/{n}": end for n, end in CRITIC_LOOP.items()}
    vote = problems[problems["pipeline"] == "vote"].set_index("task_id")["attribution"]
    assert vote.to_dict() == {"HumanEval/0": "no_passing_candidate", "HumanEval/1": "passing_not_chosen",
                              **{f"HumanEval/{n}": "chosen_passing" for n in range(2, 6)}}
    assert problems[problems["pipeline"] == "baseline"]["attribution"].isna().all()
    assert set(problems.columns) == {"pipeline", "seed", "run_id", "task_id", "passed", "attribution"}


def test_counts_and_shares_per_pipeline_in_the_tables_and_mlflow(attributed):
    home, result = attributed
    comparison = result.comparison
    counts = pd.read_csv(comparison.out_dir / "attribution.csv").set_index(["pipeline", "end"])
    for end in CRITIC_LOOP.values():
        assert counts.loc[("critic_loop", end), "count"] == 1
        assert counts.loc[("critic_loop", end), "share"] == pytest.approx(1 / 6)
    assert counts.loc[("vote", "chosen_passing"), "count"] == 4
    assert counts.loc[("vote", "passing_not_chosen"), "problems"] == "HumanEval/1@0"
    assert "baseline" not in counts.index.get_level_values("pipeline")

    section = comparison.markdown.split("## Where problems ended", 1)[1]
    assert "| critic_loop | 1 (0.17) | 1 (0.17) | 1 (0.17) | 1 (0.17) | 1 (0.17) | 1 (0.17) |" in section
    assert "| vote | 1 (0.17) | 1 (0.17) | 4 (0.67) |" in section
    html = comparison.files["html"].read_text()
    loop_run = next(c.run_id for c in result.children if c.pipeline == "critic_loop")
    # The echo, to open: its page written beside the report, so the link works from disk.
    link = re.search(rf'href="(viewer/problems/{loop_run}/HumanEval_3-[^"]+)"', html)
    assert link and (comparison.out_dir / link.group(1)).is_file()

    logged = MlflowClient(tracking_uri(home)).get_run(result.parent_run_id).data.metrics
    assert logged["attribution.critic_loop.echo"] == 1 and logged["attribution.vote.chosen_passing"] == 4
    assert logged["attribution.vote.no_passing_candidate_share"] == pytest.approx(1 / 6)
    assert not [key for key in logged if key.startswith("attribution.baseline")]
