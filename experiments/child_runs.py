"""The child runs (pipeline × seed) of one experiment, one after another or several at once.

Several at once (``parallel_runs``) pays where each child keeps the model server busy with few
requests: a pipeline with memory solves its problems one at a time, in order, so eight arms ×
three orderings run one request at a time while llama-server has slots to spare. Children stay
independent — each has its own MLflow run, checkpoints, problem order and (with ``scope: run``)
its own memory — so running them at once changes no request and no result, only the wall time.

A child whose params are measured from an earlier child (``token_budget_from``) starts only once
every child listed before it has finished, as it would one after another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

Child = TypeVar("Child")
Result = TypeVar("Result")
RunOne = Callable[[Child, list[Result]], Result]
"""Runs one child, given the children finished before it (in spec order)."""


class RunsStopped(Exception):
    """Raised in a child's thread once another child failed or the run was stopped: it ends that
    child between two problems (its finished problems are checkpointed, so a rerun resumes it)."""


def run_children(
    run_one: RunOne[Child, Result],
    children: Sequence[Child],
    *,
    at_once: int,
    waits_for_earlier: Callable[[Child], bool],
    stop: threading.Event,
) -> list[Result]:
    """``run_one`` for every child, at most ``at_once`` at a time; results in ``children``'s order.

    The first error (or Ctrl-C) sets ``stop`` and propagates at once: children still running see
    ``stop`` after their current problem and end; children not started never start.
    """
    if at_once == 1:
        finished: list[Result] = []
        for child in children:
            finished.append(run_one(child, finished))
        return finished
    results: dict[int, Result] = {}
    pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="child-run")
    running: dict[Future[Result], int] = {}

    def done_in_order() -> list[Result]:
        return [results[i] for i in sorted(results)]

    def collect(until_idle: bool) -> None:
        while running and (until_idle or len(running) >= at_once):
            finished_now, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished_now:
                results[running.pop(future)] = future.result()  # an error stops every child

    try:
        for index, child in enumerate(children):
            collect(until_idle=waits_for_earlier(child))
            running[pool.submit(run_one, child, done_in_order())] = index
        collect(until_idle=True)
    except BaseException:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [results[i] for i in range(len(children))]
