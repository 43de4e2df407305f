"""The Ray executor: this process is the driver; problems are solved by worker actors spread over
the cluster's nodes (``execution.workers_per_node`` each, ``in_flight_per_node`` problems at once
per node, ``concurrency`` across the cluster), in batches sized by :mod:`.batching`. Results and
messages come back to the driver, which keeps checkpoints, the pool and MLflow, so a run's records
are exactly what a local run writes. A worker lost with its node costs only its batches in flight
(and the one queued behind): their problems go back to the queue and another worker solves them
(at most ``max_retries`` times each)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import uuid
from collections import Counter, deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critiquelab.core.errors import FieldError, ServiceError, UserError, error_line
from critiquelab.eval.execution import isolation_level
from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.executors.batching import BatchSizer
from critiquelab.experiments.executors.job import SolveJob
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.experiments.tracking.provenance import code_fingerprint
from critiquelab.runtime.pool.message_pool import MessagePool

# Harness settings every worker needs as the driver has them (offline operation, model cache).
_FORWARDED_ENV = ("LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                  "ANONYMIZED_TELEMETRY", "CRITIQUELAB_CACHE")
_CONNECT_TIMEOUT_S = 5.0
_START_TIMEOUT_S = 120.0  # a worker imports DSPy, LiteLLM and the sandbox: seconds on a busy node
_MODEL_START_TIMEOUT_S = 600.0  # a node may assemble the model file from its parts first

log = logging.getLogger(__name__)


@dataclass
class _Worker:
    handle: Any
    node_id: str
    capacity: int
    in_flight: int = 0
    alive: bool = True


def _on(node_id: str) -> Any:
    """Ray's placement on exactly this node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id, soft=False)


def _check_reachable(address: str) -> None:
    """A cluster address that does not answer is bad input, said in seconds: Ray itself keeps
    retrying an unreachable head for minutes."""
    if address == "auto":
        _check_local_cluster()
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S):
            return
    except ValueError:
        problem = "expected auto, HOST:PORT or ray://HOST:PORT"
    except OSError as exc:
        problem = f"nothing answers there ({exc.strerror or type(exc).__name__})"
    raise FieldError("execution.address", address, f"{problem}; start a cluster with `ray start --head`")


def _check_local_cluster() -> None:
    """``auto``: Ray's own lookup of this machine's running cluster (what ``ray.init`` does first),
    without joining it, so that no model server starts for a cluster that is not there."""
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die
    except ImportError:  # a private helper of the pinned Ray: without it, ray.init refuses later
        return
    try:
        canonicalize_bootstrap_address_or_die("auto")
    except ConnectionError as exc:
        first = error_line(exc)
        raise FieldError("execution.address", "auto", f"no Ray cluster answers: {first.rstrip('.')}; "
                         "start one with `ray start --head`") from exc


@contextlib.contextmanager
def _on_node(node: str, action: str) -> Iterator[None]:
    """A node that cannot do its part at start is one line naming it, not Ray's traceback."""
    from ray.exceptions import GetTimeoutError, RayError

    try:
        yield
    except (RayError, GetTimeoutError) as exc:
        cause = getattr(exc, "cause", None) or exc
        first = error_line(cause, last=True)
        raise UserError(f"a Ray node {node} could not {action}: {first}; set every node up with "
                           "scripts/setup.sh from the driver's commit") from exc


class RayExecutor:
    def __init__(self, spec: ExperimentSpec, home: Path) -> None:
        self._spec = spec
        self._home = home
        self._workers: list[_Worker] = []
        self._servers: list[Any] = []  # NodeModelServer handles
        self._cache_server: Any = None
        self._cache_holder: Any = None  # ClusterCache: the LMs' store on the workers
        self._driver_node = ""
        self._known_nodes: set[str] = set()  # nodes given workers (or refused) so far
        self._started = False
        self.problems_per_node: Counter[str] = Counter()  # node id -> problems it solved (this run)

    # --- start and stop -----------------------------------------------------------------------

    def check(self) -> None:
        """An address nothing answers at (for ``auto``: no cluster running on this machine) is
        refused in seconds, before any model server starts."""
        _check_reachable(self._spec.execution.address)

    def start(self) -> None:
        """Join the cluster, start the workers (and model servers) on every node, and check that
        every node runs this code at the driver's sandbox isolation level."""
        if self._started:
            return
        import ray

        execution = self._spec.execution
        self.check()
        env = {name: os.environ[name] for name in _FORWARDED_ENV if name in os.environ}
        try:
            ray.init(address=execution.address, runtime_env={"env_vars": env}, log_to_driver=False,
                     logging_level="ERROR", configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = error_line(exc)
            raise FieldError("execution.address", execution.address,
                             f"no Ray cluster answers: {first}; start one with `ray start --head`") from exc
        self._started = True
        try:
            self._start_actors(ray)
        except BaseException:
            self.close()
            raise

    def _start_actors(self, ray: Any) -> None:
        from critiquelab.experiments.executors.ray_actors import ClusterCache, LMCacheServer

        self._driver_node = ray.get_runtime_context().get_node_id()
        # Always: with --no-cache the LMs still keep their new answers there (they only skip reading).
        cache_cls = ray.remote(num_cpus=0, max_concurrency=64, max_restarts=0)(LMCacheServer)
        self._cache_server = cache_cls.options(scheduling_strategy=_on(self._driver_node)).remote(
            str(self._home / "lm_cache"))
        self._cache_holder = ClusterCache(self._cache_server)
        self._add_nodes(ray, [n["NodeID"] for n in ray.nodes() if n.get("Alive")])

    def _add_nodes(self, ray: Any, nodes: list[str]) -> None:
        """Start workers (and with ``model: local`` a model server) on ``nodes`` and check them
        (same code, same sandbox isolation level); a node that fails is a :class:`UserError`."""
        from critiquelab.experiments.executors.ray_actors import NodeModelServer, ProblemWorker

        self._known_nodes.update(nodes)
        # Workers use the driver's model server on its node, and one of their own elsewhere.
        api_bases: dict[str, str | None] = dict.fromkeys(nodes)
        if self._spec.model.id.startswith("local"):
            server_cls = ray.remote(num_cpus=0, max_restarts=0)(NodeModelServer)
            started = {
                n: server_cls.options(scheduling_strategy=_on(n)).remote(self._spec.model, str(self._home))
                for n in nodes if n != self._driver_node
            }
            self._servers.extend(started.values())
            for node_id, server in started.items():
                with _on_node(node_id, "start the model server"):
                    api_bases[node_id] = ray.get(server.api_base.remote(), timeout=_MODEL_START_TIMEOUT_S)
                    healthy = ray.get(server.healthy.remote(), timeout=30)
                if not healthy:
                    raise UserError(f"the model server on Ray node {node_id} does not answer")
        execution = self._spec.execution
        share = execution.in_flight_per_node // execution.workers_per_node
        worker_cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(ProblemWorker)
        workers = [
            _Worker(worker_cls.options(scheduling_strategy=_on(node_id), max_concurrency=share).remote(
                api_bases[node_id]), node_id, share)
            for node_id in nodes for _ in range(execution.workers_per_node)
        ]
        with _on_node("of the cluster", "start a critiquelab worker"):
            described = ray.get([w.handle.describe.remote() for w in workers], timeout=_START_TIMEOUT_S)
        refused = self._refused_nodes(described)
        if refused:
            for worker in workers:
                ray.kill(worker.handle)
            raise UserError(next(iter(refused.values())))
        self._workers.extend(workers)

    def _join_new_nodes(self, ray: Any) -> None:
        """Nodes that joined the cluster since the last child run get workers now: a child run's
        problems are spread over the nodes alive when it starts."""
        new = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["NodeID"] not in self._known_nodes]
        if not new:
            return
        try:
            self._add_nodes(ray, new)
        except UserError as exc:  # at start it is bad input; now results exist, so solve without them
            log.warning("Ray nodes %s joined but are not used: %s", ", ".join(new), exc)

    def _refused_nodes(self, described: list[dict[str, str]]) -> dict[str, str]:
        """Node id -> why it may not solve problems (other code, another isolation level)."""
        code, level = code_fingerprint(), isolation_level()
        refused: dict[str, str] = {}
        for info in described:
            if info["code"] != code:
                refused[info["node_id"]] = (f"Ray node {info['node_id']} runs other critiquelab code than "
                                            "this driver; set every node up from the same commit")
            elif info["isolation"] != level and not self._spec.execution.allow_mixed_isolation:
                refused[info["node_id"]] = (
                    f"Ray node {info['node_id']} sandboxes candidates at isolation level "
                    f"'{info['isolation']}', this driver at '{level}'; install bubblewrap there (the "
                    "set-up script does) or set execution.allow_mixed_isolation: true")
        return refused

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
        self._workers, self._servers, self._cache_server, self._cache_holder = [], [], None, None
        self._known_nodes = set()
        ray.shutdown()  # leaves the cluster; the cluster itself keeps running
        self._started = False

    # --- solving ------------------------------------------------------------------------------

    def solve(
        self, job: SolveJob, problems: list[Problem], pool: MessagePool
    ) -> Generator[ProblemResult, None, None]:
        self.start()
        import ray

        self._join_new_nodes(ray)
        if self._cache_holder is not None:  # every LM of the job keeps its answers in the driver's cache
            job = dataclasses.replace(job, lm=self._cluster_cached(job.lm), role_lms={
                role: self._cluster_cached(lm) for role, lm in job.role_lms.items()})
        return self._schedule(ray, job, problems, pool)

    def _cluster_cached(self, lm: Any) -> Any:
        return lm.with_cache(self._cache_holder) if lm.cache_dir is not None else lm

    def _prepare(self, ray: Any, key: str, job: SolveJob) -> None:
        """Send the child run's job to every live worker once; one lost meanwhile is left out."""
        from ray.exceptions import ActorUnavailableError, RayActorError

        job_ref = ray.put(job)  # serialised once, fetched by each worker from the object store
        calls = {w.handle.prepare.remote(key, job_ref): w for w in self._workers if w.alive}
        for ref, worker in calls.items():
            try:
                ray.get(ref, timeout=_START_TIMEOUT_S)
            except (RayActorError, ActorUnavailableError):
                worker.alive = False

    def _schedule(self, ray: Any, job: SolveJob, problems: list[Problem], pool: MessagePool
                  ) -> Generator[ProblemResult, None, None]:
        from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

        key = uuid.uuid4().hex
        self._prepare(ray, key, job)
        queue: deque[Problem] = deque(problems)
        retries: Counter[str] = Counter()
        in_flight: dict[Any, tuple[_Worker, list[Problem]]] = {}
        sizer = BatchSizer(self._spec.execution.batch_target_s, self._spec.execution.max_batch)
        level = isolation_level()
        try:
            while queue or in_flight:
                self._submit(queue, in_flight, key, sizer)
                if not in_flight:
                    raise ServiceError("every Ray worker was lost; start nodes and run the same command "
                                       "again to resume")
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                worker, batch = in_flight.pop(ready[0])
                worker.in_flight -= 1
                try:
                    solved, seconds = ray.get(ready[0])
                except (RayActorError, ActorUnavailableError):  # its node (or process) died
                    worker.alive = False
                    self._requeue(batch, queue, retries)
                    continue
                except RayTaskError as exc:  # a problem's own error, e.g. the endpoint failed
                    cause = exc.cause
                    raise (cause if isinstance(cause, Exception) else exc) from None
                sizer.observe(len(batch), seconds)
                # The next batch goes out before this one is recorded (checkpoints, pool, MLflow):
                # the workers solve while the driver records.
                self._submit(queue, in_flight, key, sizer)
                for result, messages in solved:
                    mixed = result.isolation and result.isolation != level
                    if mixed and not self._spec.execution.allow_mixed_isolation:
                        raise ServiceError(f"problem {result.task_id} was scored at isolation level "
                                           f"'{result.isolation}', the run at '{level}'")
                    for message in messages:  # in the order the worker published them
                        pool.publish(message)
                    self.problems_per_node[worker.node_id] += 1
                    yield result
        finally:
            for ref in in_flight:  # results never recorded: a resumed run redoes them
                with contextlib.suppress(Exception):  # its worker may be gone already
                    ray.cancel(ref)

    def _requeue(self, batch: list[Problem], queue: deque[Problem], retries: Counter[str]) -> None:
        """A batch lost with its worker goes back to the front of the queue, in order."""
        for problem in batch:
            retries[problem.task_id] += 1
            if retries[problem.task_id] > self._spec.execution.max_retries:
                raise ServiceError(
                    f"problem {problem.task_id}: lost with its Ray worker {retries[problem.task_id]} times "
                    f"(execution.max_retries {self._spec.execution.max_retries})")
        queue.extendleft(reversed(batch))

    def _submit(self, queue: deque[Problem], in_flight: dict[Any, tuple[_Worker, list[Problem]]],
                key: str, sizer: BatchSizer) -> None:
        """Fill free places with batches, least-loaded worker first, each call solving its batch
        one problem at a time: at most ``concurrency`` calls solving across the cluster. Then a
        full worker gets one more batch per place, queued in the actor, so it starts the next
        batch at once rather than when the driver, busy recording, gets round to sending it."""
        places = min(self._spec.concurrency, sum(w.capacity for w in self._workers if w.alive))
        while queue:
            alive = [w for w in self._workers if w.alive]
            solving = sum(min(w.in_flight, w.capacity) for w in alive)
            free = [w for w in alive if w.in_flight < w.capacity] if solving < self._spec.concurrency else []
            free = free or [w for w in alive if w.capacity <= w.in_flight < 2 * w.capacity]
            if not free:
                return
            worker = min(free, key=lambda w: w.in_flight)
            batch = [queue.popleft() for _ in range(sizer.next_size(len(queue), places))]
            in_flight[worker.handle.solve_batch.remote(key, batch)] = (worker, batch)
            worker.in_flight += 1
