"""The Ray executor: this process is the driver; problems are solved by worker actors spread over
the cluster's nodes (``execution.workers_per_node`` each, ``in_flight_per_node`` problems at once
per node, ``concurrency`` across the cluster). Results and messages come back to the driver,
which keeps checkpoints, the pool and MLflow, so a run's records are exactly what a local run
writes. A worker lost with its node costs only its problems in flight: they go back to the queue
and another worker solves them (at most ``max_retries`` times each)."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.errors import ServiceError, UserError
from eval.execution import isolation_level
from eval.problems import Problem
from eval.results import ProblemResult
from experiments.executors.job import SolveJob
from experiments.provenance import code_fingerprint
from experiments.spec import ExperimentSpec
from pipelines.pool.message_pool import MessagePool

# Harness settings every worker needs as the driver has them (offline operation, model cache).
_FORWARDED_ENV = ("LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                  "ANONYMIZED_TELEMETRY", "CRITIQUELAB_CACHE")
_CONNECT_TIMEOUT_S = 5.0
_START_TIMEOUT_S = 120.0  # a worker imports DSPy, LiteLLM and the sandbox: seconds on a busy node
_MODEL_START_TIMEOUT_S = 600.0  # a node may assemble the model file from its parts first


@dataclass
class _Worker:
    handle: Any
    node_id: str
    capacity: int
    in_flight: int = 0
    alive: bool = True


def _check_reachable(address: str) -> None:
    """A cluster address that does not answer is bad input, said in seconds: Ray itself keeps
    retrying an unreachable head for minutes."""
    if address == "auto":
        return  # Ray reads this machine's running cluster, and says at once when there is none
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S):
            return
    except ValueError:
        problem = "expected auto, HOST:PORT or ray://HOST:PORT"
    except OSError as exc:
        problem = f"nothing answers there ({exc.strerror or type(exc).__name__})"
    raise UserError(f"execution.address '{address}': {problem}; start a cluster with `ray start --head`")


@contextlib.contextmanager
def _on_node(node: str, action: str) -> Iterator[None]:
    """A node that cannot do its part at start is one line naming it, not Ray's traceback."""
    from ray.exceptions import GetTimeoutError, RayError

    try:
        yield
    except (RayError, GetTimeoutError) as exc:
        cause = getattr(exc, "cause", None) or exc
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[-1][:300]
        raise UserError(f"a Ray node {node} could not {action}: {first}; set every node up with "
                           "scripts/setup.sh from the driver's commit") from exc


class RayExecutor:
    def __init__(self, spec: ExperimentSpec, home: Path, cache: bool) -> None:
        self._spec = spec
        self._home = home
        self._cache = cache
        self._workers: list[_Worker] = []
        self._servers: list[Any] = []  # NodeModelServer handles
        self._cache_server: Any = None
        self._started = False
        self.problems_per_node: Counter[str] = Counter()  # node id -> problems it solved (this run)

    # --- start and stop -----------------------------------------------------------------------

    def start(self) -> None:
        """Join the cluster, start the workers (and model servers) on every node, and check that
        every node runs this code at the driver's sandbox isolation level."""
        if self._started:
            return
        import ray

        execution = self._spec.execution
        _check_reachable(execution.address)
        env = {name: os.environ[name] for name in _FORWARDED_ENV if name in os.environ}
        try:
            ray.init(address=execution.address, runtime_env={"env_vars": env}, log_to_driver=False,
                     logging_level="ERROR", configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise UserError(f"execution.address '{execution.address}': no Ray cluster answers: {first}; "
                            "start one with `ray start --head`") from exc
        self._started = True
        try:
            self._start_actors(ray)
        except BaseException:
            self.close()
            raise

    def _start_actors(self, ray: Any) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from experiments.executors.ray_actors import LMCacheServer, NodeModelServer, ProblemWorker

        execution = self._spec.execution
        driver_node = ray.get_runtime_context().get_node_id()
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]

        def on(node_id: str) -> Any:
            return NodeAffinitySchedulingStrategy(node_id, soft=False)

        # Workers use the driver's model server on its node, and one of their own elsewhere.
        api_bases: dict[str, str | None] = dict.fromkeys(nodes)
        if self._spec.model.id.startswith("local"):
            server_cls = ray.remote(num_cpus=0, max_restarts=0)(NodeModelServer)
            started = {
                n: server_cls.options(scheduling_strategy=on(n)).remote(self._spec.model, str(self._home))
                for n in nodes if n != driver_node
            }
            self._servers = list(started.values())
            for node_id, server in started.items():
                with _on_node(node_id, "start the model server"):
                    api_bases[node_id] = ray.get(server.api_base.remote(), timeout=_MODEL_START_TIMEOUT_S)
                    healthy = ray.get(server.healthy.remote(), timeout=30)
                if not healthy:
                    raise UserError(f"the model server on Ray node {node_id} does not answer")
        cache_holder = None
        if self._cache:
            cache_cls = ray.remote(num_cpus=0, max_concurrency=64, max_restarts=0)(LMCacheServer)
            self._cache_server = cache_cls.options(scheduling_strategy=on(driver_node)).remote(
                str(self._home / "lm_cache"))
            from experiments.executors.ray_actors import ClusterCache

            cache_holder = ClusterCache(self._cache_server)
        self._cache_holder = cache_holder
        share = execution.in_flight_per_node // execution.workers_per_node
        worker_cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(ProblemWorker)
        for node_id in nodes:
            for _ in range(execution.workers_per_node):
                handle = worker_cls.options(scheduling_strategy=on(node_id), max_concurrency=share).remote(
                    api_bases[node_id])
                self._workers.append(_Worker(handle, node_id, share))
        with _on_node("of the cluster", "start a critiquelab worker"):
            described = ray.get([w.handle.describe.remote() for w in self._workers], timeout=_START_TIMEOUT_S)
        self._check_nodes(described)

    def _check_nodes(self, described: list[dict[str, str]]) -> None:
        code, level = code_fingerprint(), isolation_level()
        for info in described:
            if info["code"] != code:
                raise UserError(f"Ray node {info['node_id']} runs other critiquelab code than this driver; "
                                "set every node up from the same commit")
            if info["isolation"] != level and not self._spec.execution.allow_mixed_isolation:
                raise UserError(
                    f"Ray node {info['node_id']} sandboxes candidates at isolation level "
                    f"'{info['isolation']}', this driver at '{level}'; install bubblewrap there (the "
                    "set-up script does) or set execution.allow_mixed_isolation: true")

    def close(self) -> None:
        if not self._started:
            return
        import ray

        for server in self._servers:
            with contextlib.suppress(Exception):  # a lost node took its server with it
                ray.get(server.stop.remote(), timeout=30)
        for actor in [w.handle for w in self._workers] + self._servers + [self._cache_server]:
            if actor is not None:
                ray.kill(actor)
        self._workers, self._servers, self._cache_server = [], [], None
        ray.shutdown()  # leaves the cluster; the cluster itself keeps running
        self._started = False

    # --- solving ------------------------------------------------------------------------------

    def solve(self, job: SolveJob, problems: list[Problem], pool: MessagePool) -> Iterator[ProblemResult]:
        self.start()
        import ray

        if self._cache_holder is not None and job.lm.cache_dir is not None:
            job = SolveJob(job.pipeline, job.lm.with_cache(self._cache_holder), job.label, job.seed,
                           job.timeout_s, job.run_id)
        return self._schedule(ray, job, problems, pool)

    def _schedule(self, ray: Any, job: SolveJob, problems: list[Problem], pool: MessagePool
                  ) -> Iterator[ProblemResult]:
        from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

        key, boxed = uuid.uuid4().hex, [ray.put(job)]  # boxed: workers fetch it once, not per call
        queue: deque[Problem] = deque(problems)
        retries: Counter[str] = Counter()
        in_flight: dict[Any, tuple[_Worker, Problem]] = {}
        level = isolation_level()
        try:
            while queue or in_flight:
                self._submit(queue, in_flight, key, boxed)
                if not in_flight:
                    raise ServiceError("every Ray worker was lost; start nodes and run the same command "
                                       "again to resume")
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                worker, problem = in_flight.pop(ready[0])
                worker.in_flight -= 1
                try:
                    result, messages = ray.get(ready[0])
                except (RayActorError, ActorUnavailableError):  # its node (or process) died
                    worker.alive = False
                    retries[problem.task_id] += 1
                    if retries[problem.task_id] > self._spec.execution.max_retries:
                        raise ServiceError(
                            f"problem {problem.task_id}: lost with its Ray worker "
                            f"{retries[problem.task_id]} times (execution.max_retries "
                            f"{self._spec.execution.max_retries})") from None
                    queue.appendleft(problem)
                    continue
                except RayTaskError as exc:  # the problem's own error, e.g. the endpoint failed
                    cause = exc.cause
                    raise (cause if isinstance(cause, Exception) else exc) from None
                verdict_level = result.extra.get("isolation")
                mixed = verdict_level and verdict_level != level
                if mixed and not self._spec.execution.allow_mixed_isolation:
                    raise ServiceError(f"problem {problem.task_id} was scored at isolation level "
                                       f"'{verdict_level}', the run at '{level}'")
                for message in messages:  # in the order the worker published them
                    pool.publish(message)
                self.problems_per_node[worker.node_id] += 1
                yield result
        finally:
            for ref in in_flight:  # results never recorded: a resumed run redoes them
                with contextlib.suppress(Exception):  # its worker may be gone already
                    ray.cancel(ref)

    def _submit(self, queue: deque[Problem], in_flight: dict[Any, tuple[_Worker, Problem]],
                key: str, boxed: list[Any]) -> None:
        """Fill free places, least-loaded worker first, up to ``concurrency`` across the cluster."""
        while queue and len(in_flight) < self._spec.concurrency:
            free = [w for w in self._workers if w.alive and w.in_flight < w.capacity]
            if not free:
                return
            worker = min(free, key=lambda w: w.in_flight)
            problem = queue.popleft()
            in_flight[worker.handle.solve.remote(key, boxed, problem)] = (worker, problem)
            worker.in_flight += 1
