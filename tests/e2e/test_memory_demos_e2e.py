"""Verified demos recalled on failure, on the real bundled model: reflexion with memory
`recall: on_failure, lessons: false, demos: 1` on two problems made for it. The first (add two
numbers) the model solves, so it leaves a verified demo; the second shows two visible examples
that contradict each other (`is_even(2)` is True, and False), so no program passes both and its
first attempt fails a visible example whatever the model writes — the retry is forced, not hoped
for. The second problem's first attempt must go without memory and its retry must carry the first
problem's demo as a DSPy demo turn. Four model calls (~30 s on an idle 2-core machine; 13 min
measured while another model job held the same 2 cores)."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from mlflow.tracking import MlflowClient

from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.memory.bank import MemoryBank

pytestmark = pytest.mark.e2e

PROBLEMS = [
    {"task_id": "Demo/0", "entry_point": "add",
     "prompt": 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b.\n'
               '    >>> add(2, 3)\n    5\n    """\n',
     "canonical_solution": "    return a + b\n",
     "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-10, 4) == -6\n"},
    {"task_id": "Demo/1", "entry_point": "is_even",
     "prompt": 'def is_even(n: int) -> bool:\n    """Return whether n is even.\n'
               '    >>> is_even(2)\n    True\n    >>> is_even(2)\n    False\n    """\n',
     "canonical_solution": "    return n % 2 == 0\n",
     "test": "def check(candidate):\n    assert candidate(4) is True\n    assert candidate(7) is False\n"},
]


def test_the_retry_carries_the_earlier_problems_verified_demo_on_the_bundled_model(tmp_path):
    home = tmp_path / "home"
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in PROBLEMS))
    spec = tmp_path / "demos.yaml"
    memory = {"enabled": True, "recall": "on_failure", "lessons": False, "demos": 1, "reflect": False,
              "record": []}
    spec.write_text(yaml.safe_dump({
        "name": "memory-demos-e2e", "dataset": {"source": str(data), "format": "humaneval"},
        "pipelines": [{"name": "reflexion", "params": {"max_trials": 2}, "memory": memory}],
    }))
    proc = subprocess.run(
        [sys.executable, "-m", "critiquelab.experiments.cli", "run", str(spec), "--no-progress"],
        env={**os.environ, "CRITIQUELAB_HOME": str(home)}, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri(home))
    experiment = client.get_experiment_by_name("memory-demos-e2e")
    child = next(r for r in client.search_runs([experiment.experiment_id])
                 if "mlflow.parentRunId" in r.data.tags)
    with open(client.download_artifacts(child.info.run_id, "messages.jsonl")) as log:
        messages = [json.loads(line) for line in log]
    with MemoryBank(home) as bank:  # besides the demo, reflexion keeps its reflection on Demo/1
        demos = [e for e in bank.episodic.all() if e.type == "demo"]
    assert [d.task_id for d in demos] == ["Demo/0"], "the model did not solve add(a, b)"
    [demo] = demos

    coder = [m for m in messages if m["intent"] in ("output.complete", "fix")]
    second = [m for m in coder if m["task_id"] == "Demo/1"]
    assert [m["intent"] for m in second] == ["output.complete", "fix"]  # attempt, forced retry
    first_attempt, retry = (m["metadata"]["trace"] for m in second)
    [sent_first] = [e["request"] for e in first_attempt["exchanges"]]
    [sent_retry] = [e["request"] for e in retry["exchanges"]]
    assert not first_attempt.get("memory_ids") and len(sent_first) == 2  # system, task: no memory
    assert retry["memory_ids"] == [demo.id]
    # The demo is a few-shot turn before the task: Demo/0's prompt, then its verified code.
    assert [m["role"] for m in sent_retry] == ["system", "user", "assistant", "user"]
    assert "def add(a: int, b: int)" in sent_retry[1]["content"]
    assert sent_retry[2]["content"] == f"```python\n{demo.context['code']}\n```"
    assert "def is_even" in sent_retry[3]["content"] and "[this task, attempt 1]" in sent_retry[3]["content"]
    assert child.data.metrics["memory.injected_first_attempts"] == 0
    assert child.data.metrics["memory.demo_calls"] == 1
    sent = json.dumps([m["metadata"].get("trace") for m in messages]) + demo.model_dump_json()
    for row in PROBLEMS:  # no hidden-test line in any request or in the demo
        for line in (line.strip() for line in row["test"].splitlines()):
            if len(line) >= 12 and line not in row["prompt"]:
                assert line not in sent and json.dumps(line)[1:-1] not in sent
