"""debate and vote (and self_refine) on the real bundled model, a few HumanEval problems."""

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from critiquelab.experiments.api import run
from critiquelab.experiments.compare.runs import compare_runs
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.pool.messages import Intent

pytestmark = pytest.mark.e2e


def test_debate_and_vote_on_bundled_model(home):
    spec = {
        "name": "e2e-debate-vote",
        "dataset": {"source": "humaneval", "limit": 1},  # the slowest e2e test: one problem
        "model": {"id": "local", "max_tokens": 512},
        "pipelines": [
            {"name": "debate", "params": {"debaters": 3, "rounds": 1}},
            {"name": "vote", "params": {"k": 3}},
        ],
    }
    result = run(spec, progress=False)
    debate, vote = result.children
    assert len(debate.results) == len(vote.results) == 1
    for key in ("consensus_rate", "consensus_correctness", "flips_correct_to_wrong",
                "flips_wrong_to_correct"):
        assert key in debate.metrics, key
    # Rated over the debates that reached consensus; absent when none did (critiquelab.eval.summary).
    assert ("final_in_majority_rate" in debate.metrics) == (debate.metrics["consensus_rate"] > 0)
    assert "samples_pass_at_1" in vote.metrics
    for r in debate.results:
        assert len(r.extra["debaters_first_passed"]) == len(r.extra["debaters_final_passed"]) == 3
        assert len(r.extra["agreement"]) == 2
    assert all(r.extra["samples"] == 3 for r in vote.results)

    client = MlflowClient(tracking_uri(home))
    log = client.download_artifacts(debate.run_id, "messages.jsonl")
    intents = [json.loads(line)["intent"] for line in Path(log).read_text().splitlines()]
    assert intents.count(Intent.PROPOSAL) == 3 and intents.count(Intent.ARGUMENT) == 3
    assert intents.count(Intent.VERDICT) == 1

    comparison = compare_runs(result.parent_run_id)
    assert sorted(comparison.table["pipeline"]) == ["debate", "vote"]
    assert len(comparison.pairs) == 1 and "mcnemar_p" in comparison.pairs
    for name in ("report.html", "summary.md"):
        assert (comparison.out_dir / name).stat().st_size > 0
    assert {p.name for p in comparison.out_dir.glob("*.png")} == {
        "pass_at_1.png", "pass_vs_tokens.png", "learning_curve.png"}
    logged = {a.path for a in client.list_artifacts(result.parent_run_id, "comparison")}
    assert "comparison/report.html" in logged and "comparison/summary.md" in logged


def test_self_refine_on_bundled_model(home):
    spec = {
        "name": "e2e-self-refine",
        "dataset": {"source": "humaneval", "limit": 2},
        "model": {"id": "local", "max_tokens": 512},
        "pipelines": [{"name": "self_refine", "params": {"max_iterations": 2}}],
    }
    child = run(spec, progress=False).children[0]
    assert len(child.results) == 2
    assert "first_pass_at_1" in child.metrics
    assert ("harmful_revision_rate" in child.metrics) == (child.metrics["first_pass_at_1"] > 0)
    assert all(r.extra["reviews"] >= 1 for r in child.results)


def test_vote_greedy_first_with_the_visible_filter_on_bundled_model(home):
    """The greedy answer is the baseline's own request (served from the LM cache after the
    baseline) and stands when it passes the visible examples; otherwise k samples decide."""
    spec = {
        "name": "e2e-vote-greedy-filter",
        "dataset": {"source": "humaneval", "task_ids": ["HumanEval/0", "HumanEval/3"]},
        "model": {"id": "local", "max_tokens": 512},
        "pipelines": [
            {"name": "baseline"},
            {"name": "vote", "params": {"k": 3, "select": "visible_filter", "greedy_first": True}},
        ],
    }
    baseline, vote = run(spec, progress=False).children
    greedy = {r.task_id: r for r in baseline.results}
    for result in vote.results:
        kept = result.extra["greedy_answer"] == 1.0
        assert result.extra["samples"] == (0 if kept else 3)
        assert result.lm_calls == (1 if kept else 4) and result.cached_lm_calls >= 1
        if kept:
            assert result.final_code == greedy[result.task_id].final_code
        assert 0 <= result.extra["visible_passing_samples"] <= result.extra["samples"]
    assert "greedy_answer_rate" in vote.metrics
