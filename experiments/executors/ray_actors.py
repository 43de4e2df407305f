"""What runs on the Ray cluster's nodes: problem workers, one model server per node, and the
driver's LM cache served to every worker. Plain classes; the driver wraps them with
``ray.remote`` (see ``ray_cluster.py``), so importing this module needs no cluster."""

from __future__ import annotations

import contextlib
import dataclasses
import time
import urllib.request
from pathlib import Path
from typing import Any

from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.executors.job import SolveJob
from critiquelab.experiments.spec.experiment import ModelSpec
from critiquelab.pipelines.solve import solve_and_score
from critiquelab.runtime.pool.context import using_pool
from critiquelab.runtime.pool.message_pool import MessagePool
from critiquelab.runtime.pool.messages import Message

Solved = tuple[ProblemResult, list[Message]]  # one problem's result and the messages it published


def describe_node() -> dict[str, str]:
    """What the driver checks before it trusts a worker: its node, sandbox level and code."""
    import ray

    from critiquelab.eval.execution import isolation_level
    from critiquelab.experiments.tracking.provenance import code_fingerprint

    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "isolation": isolation_level(), "code": code_fingerprint(),
    }


class ProblemWorker:
    """One worker process: solves batches of one child run's problems, several batches at once
    (a threaded actor; each call solves its batch in order, so a call is one problem in flight at
    a time and the driver's concurrency counts calls).

    Its messages go to a pool of its own per problem, in memory, and travel back with the result;
    the driver publishes them, so the run's pool (and its Chroma store) has a single writer.
    """

    def __init__(self, api_base: str | None) -> None:
        self._api_base = api_base  # this node's model server (model: local), else the job's endpoint
        self._job: tuple[str, SolveJob] | None = None  # (child run key, its job)

    def describe(self) -> dict[str, str]:
        """Also warms the process up: the first model call in a process imports LiteLLM, which
        the driver's endpoint probe does for the local executor before its clock starts."""
        import litellm  # noqa: F401

        return describe_node()

    def prepare(self, key: str, job: SolveJob) -> None:
        """Take one child run's job (pipeline, LMs, role LMs, settings) once, before its batches,
        rather than with every call; it replaces the previous child run's, which is done."""
        if self._api_base is not None:
            job = dataclasses.replace(job, lm=job.lm.copy(api_base=self._api_base))
        self._job = (key, job)

    def solve_batch(self, key: str, problems: list[Problem]) -> tuple[list[Solved], float]:
        """Each problem's result and messages, in order, and the seconds the batch took here
        (the driver sizes later batches from it)."""
        current = self._job
        if current is None or current[0] != key:
            raise RuntimeError(f"worker not prepared for child run {key}")  # a driver bug
        job = current[1]
        start = time.monotonic()
        solved = [self._solve(job, problem) for problem in problems]
        return solved, time.monotonic() - start

    @staticmethod
    def _solve(job: SolveJob, problem: Problem) -> Solved:
        pool = MessagePool()
        with using_pool(pool, run_id=job.run_id):
            result = solve_and_score(
                job.pipeline, problem, lm=job.lm, label=job.label, seed=job.seed, timeout_s=job.timeout_s,
                role_lms=job.role_lms,
            )
        return result, pool.history()


class NodeModelServer:
    """The bundled model served on one node for that node's workers: started once (the model file
    assembled and verified there), health-checked by the driver, stopped with the job."""

    def __init__(self, model: ModelSpec, home: str) -> None:
        import ray

        from critiquelab.experiments.serving.provision import resolve_model, serve_model

        self._stack = contextlib.ExitStack()
        identity = resolve_model(model)
        # Its log apart from the driver's server's, should the node share the data directory.
        node_dir = Path(home) / "nodes" / ray.get_runtime_context().get_node_id()[:12]
        lm = self._stack.enter_context(serve_model(identity, model, node_dir, cache="off"))
        self._api_base = str(lm.kwargs["api_base"])

    def api_base(self) -> str:
        return self._api_base

    def healthy(self) -> bool:
        """The server lists its model (an OpenAI-compatible ``/models``) within 10 s."""
        try:
            with urllib.request.urlopen(f"{self._api_base}/models", timeout=10) as reply:
                status: int = reply.status  # typeshed types urlopen's reply as Any
        except OSError:
            return False
        return status == 200

    def stop(self) -> None:
        self._stack.close()


class LMCacheServer:
    """The driver's on-disk LM cache, served to every worker of the cluster.

    Why not a shared cache directory: diskcache is SQLite, and SQLite over a network file system
    from several machines is exactly the concurrent-writer set-up that corrupts stores. One actor
    on the driver's node owns the cache (so it stays in the data directory, where a resumed or
    local run finds it); a lookup costs one round trip, milliseconds against a model call.
    """

    def __init__(self, directory: str) -> None:
        import diskcache

        self._cache = diskcache.Cache(directory, size_limit=8 * 2**30)  # as experiments/serving/lm.py

    def get(self, key: str) -> Any:
        return self._cache.get(key)

    def set(self, key: str, value: Any) -> None:
        self._cache.set(key, value)

    def delete(self, key: str) -> None:
        self._cache.delete(key)

    def close(self) -> None:
        self._cache.close()


class ClusterCache:
    """An LM cache holder (see ``HarnessLM.with_cache``) whose store is the driver's
    :class:`LMCacheServer`; it pickles as the actor's handle, so it travels with the LM."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def get(self) -> _RemoteStore:
        return _RemoteStore(self._server)

    def close(self) -> None:
        """The driver closes the server itself."""

    def __deepcopy__(self, memo: dict[int, Any]) -> ClusterCache:
        return self  # copies of the LM (per seed, per sample) share it, like the local cache


class _RemoteStore:
    """``get``/``set``/``delete`` as diskcache has them, each one call to the cache server."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def get(self, key: str) -> Any:
        import ray

        return ray.get(self._server.get.remote(key))

    def set(self, key: str, value: Any) -> None:
        import ray

        ray.get(self._server.set.remote(key, value))

    def delete(self, key: str) -> None:
        import ray

        ray.get(self._server.delete.remote(key))
