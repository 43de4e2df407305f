"""The bundled model on a two-node Ray cluster: the driver's node uses the driver's server, the
second node starts one of its own (held by an actor), and both are gone after the run."""

import subprocess
from pathlib import Path

import pytest
from support.ray_cluster import two_node_cluster

from experiments.api import run

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _llama_servers() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "llama_cpp.server|llama-server"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def test_one_model_server_per_node(tmp_path: Path):
    home = tmp_path / "home"
    before = _llama_servers()
    with two_node_cluster() as (cluster, _):
        spec = {
            "name": "ray-bundled-model", "dataset": {"source": "humaneval", "limit": 2},
            "model": {"id": "local", "slots": 1}, "pipelines": [{"name": "baseline"}], "concurrency": 2,
            "execution": {"executor": "ray", "address": cluster.address, "in_flight_per_node": 1},
        }
        result = run(spec, home=home, progress=False)
    assert [r.task_id for r in result.children[0].results] == ["HumanEval/0", "HumanEval/1"]
    assert all(r.lm_calls >= 1 and r.final_code for r in result.children[0].results)
    node_logs = list((home / "nodes").glob("*/logs/*.log"))
    assert len(node_logs) == 1  # the second node's server; the head used the driver's
    assert _llama_servers() == before  # every server stopped with the run
