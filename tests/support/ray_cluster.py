"""A real two-node Ray cluster on 127.0.0.1 for tests: a head and a second node, each with its
own raylet and object store, started by this process and torn down by it (even on failure)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
_OBJECT_STORE_BYTES = 80 * 2**20  # small: the machine is shared


@contextlib.contextmanager
def two_node_cluster(second_node_env: dict[str, str] | None = None) -> Iterator[tuple[Any, Any]]:
    """Yield ``(cluster, second_node)``; workers import this checkout (PYTHONPATH), as a lab's
    nodes would after running the set-up script from one commit. ``second_node_env``: variables
    only the second node's processes see (a machine set up differently)."""
    # Ray's switch for single-machine clusters: every address is 127.0.0.1, not the LAN address.
    # Read when Ray is first imported, hence set before the import below.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray.cluster_utils import Cluster

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), saved]))
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={
        "num_cpus": 1, "object_store_memory": _OBJECT_STORE_BYTES, "include_dashboard": False,
    })
    try:
        with _environment(second_node_env or {}):
            second = cluster.add_node(num_cpus=1, object_store_memory=_OBJECT_STORE_BYTES)
        cluster.wait_for_nodes(timeout=120)
        yield cluster, second
    finally:
        cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@contextlib.contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
