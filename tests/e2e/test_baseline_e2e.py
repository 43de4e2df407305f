"""The real bundled model, served by the local server (llama-server when the set-up built it,
else llama-cpp-python), on 3 HumanEval problems."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from critiquelab.experiments.serving.server_build import find_built_server
from critiquelab.experiments.tracking.store import tracking_uri

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _llama_servers() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "llama_cpp.server|llama-server"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def test_cli_run_on_bundled_model(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "CRITIQUELAB_HOME": str(home)}
    before = _llama_servers()
    proc = subprocess.run(
        [sys.executable, "-m", "critiquelab.experiments.cli", "run", str(ROOT / "experiments/baseline.yaml"),
         "--limit", "3", "--no-progress"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pass@1" in proc.stdout
    assert _llama_servers() == before  # the server stopped with the run

    client = MlflowClient(tracking_uri(home))
    experiment = client.get_experiment_by_name("baseline")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    child = next(r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id)
    assert parent.data.params["model.file_sha256"].startswith("1d9614638d18")
    expected_server = "llama-server" if find_built_server() else "llama-cpp-python"
    assert parent.data.params["serving.server"] == expected_server
    assert 0.0 <= child.data.metrics["pass_at_1"] <= 1.0
    assert child.data.metrics["completion_tokens"] > 0
    table = pd.read_parquet(client.download_artifacts(child.info.run_id, "problems.parquet"))
    assert list(table.task_id) == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert set(table.status) <= {"passed", "failed", "timed_out"}
