"""The bundled model on a two-node Ray cluster: the driver's node uses the driver's server, the
second node starts one of its own (held by an actor), and both are gone after the run."""

import os
from pathlib import Path

import pytest
from support.ray_cluster import two_node_cluster

from critiquelab.experiments.api import run

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _our_llama_servers() -> list[int]:
    """Model servers started from this test process (the driver's, and the node actors' under the
    raylets it started); other sessions' servers on the machine are not ours to count."""
    parents, names = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended meanwhile
        pid = int(stat.parent.name)
        names[pid] = text[text.index("(") + 1 : text.rindex(")")]
        parents[pid] = int(text[text.rindex(")") + 2 :].split()[1])
    ours = {os.getpid()}
    while True:
        more = {pid for pid, parent in parents.items() if parent in ours} - ours
        if not more:
            break
        ours |= more
    return [pid for pid in ours if names.get(pid) == "llama-server"]


def test_one_model_server_per_node(tmp_path: Path):
    home = tmp_path / "home"
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
    assert _our_llama_servers() == []  # every server stopped with the run
