"""Memory on the real bundled model: two problems with memory on, an entry written from what the
model reflected on the first, and the second problem's coder request carrying it. About four
model calls (~30 s on an idle 2-core machine)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.runtime.memory.bank import MemoryBank

pytestmark = pytest.mark.e2e


def test_memory_on_bundled_model(tmp_path, humaneval_problems):
    home = tmp_path / "home"
    spec = tmp_path / "memory.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "memory-e2e", "dataset": {"source": "humaneval", "limit": 2},
        "pipelines": [{"name": "baseline", "label": "baseline+memory",
                       "memory": {"enabled": True, "approval": "auto"}}],
    }))
    proc = subprocess.run(
        [sys.executable, "-m", "critiquelab.experiments.cli", "run", str(spec), "--no-progress"],
        env={**os.environ, "CRITIQUELAB_HOME": str(home)}, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri(home))
    experiment = client.get_experiment_by_name("memory-e2e")
    child = next(r for r in client.search_runs([experiment.experiment_id])
                 if "mlflow.parentRunId" in r.data.tags)
    with open(client.download_artifacts(child.info.run_id, "messages.jsonl")) as log:
        messages = [json.loads(line) for line in log]
    coder_traces = [m["metadata"]["trace"] for m in messages if m["intent"] == "output.complete"]
    reflections = [m for m in messages if m["intent"] == "reflection"]
    assert len(coder_traces) == 2 and len(reflections) == 2
    with MemoryBank(home) as bank:
        entries = {e.id: e for e in bank.episodic.all()}
    assert entries, "the model's reflections wrote no entry"
    # The second problem's coder saw the memory written on the first, by id and by text.
    last = coder_traces[-1]
    assert last.get("memory_ids") and set(last["memory_ids"]) & set(entries)
    shown = last["inputs"]["memories"]
    assert any(entries[i].content in shown for i in last["memory_ids"] if i in entries)
    assert any(entries[i].task_id == "HumanEval/0" for i in last["memory_ids"] if i in entries)
    # No hidden test line in any entry or anything the model was asked.
    sent = json.dumps([t["inputs"] for m in messages if (t := m["metadata"].get("trace"))])
    stored = json.dumps([e.model_dump() for e in entries.values()])
    for problem in humaneval_problems[:2]:
        for line in (line.strip() for line in problem.test.splitlines()):
            if len(line) >= 12 and line not in problem.prompt:
                assert line not in sent and line not in stored and json.dumps(line)[1:-1] not in sent
    assert child.data.metrics["memory.reuse_rate"] > 0
    assert Path(home / "memory" / "memory.sqlite").is_file()
