"""`critiquelab optimize` end to end on the real bundled model: a 2/2/2 split of HumanEval,
BootstrapFewShot, one TextGrad step on the coder's instruction, the paired held-out test,
then `critiquelab export` of the result."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from critiquelab.experiments.tracking.store import tracking_uri

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TEXTGRAD_LOG_DIR"}  # as a user has it
    env["CRITIQUELAB_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "critiquelab.experiments.cli", *args], env=env,
                          capture_output=True,
                          text=True, timeout=900)


def test_optimize_and_export_on_bundled_model(tmp_path):
    home = tmp_path / "home"
    spec = yaml.safe_load((ROOT / "experiments/optimize_baseline.yaml").read_text())
    spec.update(
        name="optimize-e2e", dataset={"source": "humaneval", "limit": 6},
        split={"seed": 0, "train": 2, "val": 2},
        optimizer={"name": "bootstrap", "params": {"max_bootstrapped_demos": 1}},
        refine={"role": "coder", "steps": 1, "batch_size": 2},
    )
    path = tmp_path / "optimize.yaml"
    path.write_text(yaml.safe_dump(spec))

    proc = _cli(home, "optimize", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "validation pass@1" in proc.stdout and "held-out test pass@1" in proc.stdout

    client = MlflowClient(tracking_uri(home))
    experiment = client.get_experiment_by_name("optimize-e2e")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("critiquelab.kind") == "optimize")
    steps = {r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(steps) == {"baseline_val", "compile", "compiled_val", "refine", "test"}
    assert all(r.info.status == "FINISHED" for r in steps.values())
    split = json.loads(Path(client.download_artifacts(parent.info.run_id, "split.json")).read_text())
    assert len(split["test"]) == 2 and not set(split["test"]) & set(split["train"] + split["val"])
    assert 0.0 <= parent.data.metrics["test_pass_at_1"] <= 1.0
    refine = steps["refine"]
    instruction = Path(client.download_artifacts(refine.info.run_id, "instruction_after.txt")).read_text()
    assert instruction.strip()
    assert list((home / "logs" / "textgrad").glob("*.jsonl"))  # TextGrad's prompt log: in the data dir
    # The held-out test ran as an experiment of its own, unoptimised pipeline included.
    test_runs = client.search_runs([client.get_experiment_by_name("optimize-e2e-test").experiment_id])
    labels = {r.data.params.get("pipeline.label") for r in test_runs} - {None}
    assert "baseline" in labels

    exported = _cli(home, "export", steps["compile"].info.run_id, "--format", "json,md,txt",
                    "--out", str(tmp_path / "export"))
    assert exported.returncode == 0, exported.stderr[-2000:]
    state = json.loads((tmp_path / "export" / "program.json").read_text())
    instruction_line = state["coder"]["signature"]["instructions"].strip().splitlines()[0]
    for name in ("prompts.md", "prompts.txt"):  # the coder's messages as the LM receives them
        text = (tmp_path / "export" / name).read_text()
        assert instruction_line in text
        for demo in state["coder"]["demos"]:
            assert demo["code"].strip().splitlines()[-1] in text
