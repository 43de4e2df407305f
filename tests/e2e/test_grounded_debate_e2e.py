"""Execution-grounded debate with the judge rule on the real bundled model, one HumanEval problem:
every proposal and revision is run on the prompt's visible examples, the judge reads the results,
and no reply is cut at the reply limits the shipped specs give debaters and the judge."""

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from critiquelab.experiments.api import run
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.pipelines.debate.grounding import RESULTS_HEADING
from critiquelab.runtime.pool.messages import Intent

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]  # minutes on a busy 2-core machine


def test_grounded_debate_with_the_judge_rule_on_bundled_model(home):
    spec = {
        "name": "e2e-grounded-debate",
        "dataset": {"source": "humaneval", "limit": 1},
        "model": {"id": "local"},
        "pipelines": [{"name": "debate", "params": {"debaters": 2, "rounds": 1, "execution_feedback": True,
                                                    "judge_rule": "visible_pass"},
                       # the reply limits the shipped debate specs give these roles (issue #57)
                       "roles": {"debater": {"max_tokens": 2048}, "judge": {"max_tokens": 2048}}}],
    }
    debate = run(spec, progress=False).children[0]
    (result,) = debate.results
    assert debate.metrics["truncated_replies"] == 0
    assert "rule_overrides" in debate.metrics and result.extra["rule_override"] in (True, False)

    log = MlflowClient(tracking_uri(home)).download_artifacts(debate.run_id, "messages.jsonl")
    messages = [json.loads(line) for line in Path(log).read_text().splitlines()]
    coded = [m for m in messages if m["intent"] in (Intent.PROPOSAL, Intent.ARGUMENT)]
    assert len(coded) == 4
    assert all(m["metadata"]["visible_report"].startswith(("PASS", "FAIL", "the code does not compile"))
               for m in coded)
    verdict = next(m for m in messages if m["intent"] == Intent.VERDICT)
    assert verdict["metadata"]["trace"]["inputs"]["proposals"].count(RESULTS_HEADING) == 2
    if verdict["metadata"]["rule_override"] is not None:  # the rule's answer passes the examples
        final = next(m for m in coded if m["intent"] == Intent.ARGUMENT
                     and m["metadata"]["debater"] == verdict["metadata"]["rule_override"])
        assert final["metadata"]["visible_passed"] and verdict["content"] == final["content"]
