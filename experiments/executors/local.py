"""The default executor: problems solved by threads in this process."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Generator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.executors.job import SolveJob
from critiquelab.pipelines.solve import solve_and_score
from critiquelab.runtime.pool.context import bind_pool
from critiquelab.runtime.pool.message_pool import MessagePool


class LocalExecutor:
    """At most ``concurrency`` problems at once, each in a thread with the run's pool bound."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency

    def check(self) -> None:
        """Threads take no input that could be refused."""

    def start(self) -> None:
        """Threads need no preparation."""

    def solve(
        self, job: SolveJob, problems: list[Problem], pool: MessagePool
    ) -> Generator[ProblemResult, None, None]:
        solve = bind_pool(pool, functools.partial(
            solve_and_score, lm=job.lm, label=job.label, seed=job.seed, timeout_s=job.timeout_s,
            role_lms=job.role_lms,
        ), run_id=job.run_id)
        return solve_concurrently(solve, job.pipeline, problems, 1 if job.in_order else self.concurrency)

    def close(self) -> None:
        """Nothing outlives a ``solve``."""


def solve_concurrently(
    solve: Callable[..., ProblemResult], pipeline: object, problems: list[Problem], concurrency: int,
) -> Generator[ProblemResult, None, None]:
    """Yield results as problems finish, with at most ``concurrency`` in flight.

    On an error or Ctrl-C nothing more is started and the exception propagates at once: waiting
    for the problems in flight could take minutes (a debate problem is ~10 model calls). Their
    results are never recorded, so a resumed run redoes them, replaying their finished model calls
    from the LM cache; stopping the model server, which the caller does next, ends their
    remaining calls.
    """
    queue = iter(problems)
    pool = ThreadPoolExecutor(max_workers=concurrency)
    in_flight: set[Future[ProblemResult]] = set()
    try:
        for problem in itertools.islice(queue, concurrency):
            in_flight.add(pool.submit(solve, pipeline, problem))
        while in_flight:
            finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in finished:
                yield future.result()  # an exception aborts the run; it is resumable
                for problem in itertools.islice(queue, 1):
                    in_flight.add(pool.submit(solve, pipeline, problem))
    except BaseException:  # also GeneratorExit: the consumer stopped early
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
