"""Role calls of one problem in flight at once, where a pipeline's pattern allows it (debaters
within a round, vote samples), without letting the degree of concurrency change any request.

Why threads that copy the caller's context: the LM and adapter (``dspy.context``), the task's
usage meter and the acting role (:mod:`critiquelab.core.usage`), the pool and the run id
(:mod:`critiquelab.runtime.pool.context`) all live in context variables, and a new thread starts with
none of them. Each call therefore runs in a copy of the context it was submitted from, so its
tokens count toward the right problem and role and it talks to the same LM and pool.

Why results do not depend on it: a concurrent run only changes *when* a call is made, never
what it asks. The agents build each request from messages they sort by agent index (a debater
reads its neighbours' previous round in debater order; the judge's transcript is in round and
debater order), and samples take their seeds from their index, not from their completion order.
Nor does what an optimiser learns from a run: a call in a thread records its role calls on a
trace of its own, joined to the caller's in an order the program fixes
(:mod:`critiquelab.runtime.agent_traces`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import dspy

from critiquelab.runtime.agent_traces import AgentTraces, join_trace

if TYPE_CHECKING:
    from critiquelab.runtime.agents import Agent
    from critiquelab.runtime.pool.messages import Message

T = TypeVar("T")

# The most role calls of one problem at once a pipeline may ask for (``parallel_agents``): more
# would only queue at any endpoint.
MAX_PARALLEL_AGENTS = 16


class ParallelCalls:
    """At most ``limit`` calls running at once, each in a copy of the submitting context.

    With ``limit == 1`` a call runs inline when it is submitted (no thread at all: the
    sequential behaviour, exceptions included, is exactly that of a plain call). Leaving the
    ``with`` block on an exception does not wait for calls still running — a model request can
    take minutes — it cancels those not started and lets the exception propagate; the running
    ones end with their request, and nobody reads their results.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._executor = (
            ThreadPoolExecutor(max_workers=limit, thread_name_prefix="critiquelab-agent")
            if limit > 1 else None
        )
        # Where DSPy traces calls (an optimiser's trace, or its default one): (the caller's
        # trace, a call's own), in submission order.
        self._traces: list[tuple[list[Any], list[Any]]] = []

    def submit(self, fn: Callable[..., T], /, *args: object) -> Future[T]:
        """Run ``fn(*args)``. Where DSPy traces role calls, a call in a thread records them on a
        trace of its own, which joins the caller's when the block ends, in submission order."""
        if self._executor is None:
            future: Future[T] = Future()
            future.set_result(fn(*args))
            return future
        caller_trace = dspy.settings.trace
        if caller_trace is None:
            return self._executor.submit(contextvars.copy_context().run, fn, *args)
        own: list[Any] = []
        self._traces.append((caller_trace, own))
        return self._executor.submit(contextvars.copy_context().run, _traced, own, fn, *args)

    @staticmethod
    def finished(futures: Iterable[Future[T]]) -> set[Future[T]]:
        """Wait until at least one of ``futures`` is done; return those that are."""
        return wait(list(futures), return_when=FIRST_COMPLETED).done

    def __enter__(self) -> ParallelCalls:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=exc_type is None, cancel_futures=exc_type is not None)
        if exc_type is None:
            for caller_trace, own in self._traces:
                join_trace(caller_trace, own)


def _traced(own: list[Any], fn: Callable[..., T], *args: object) -> T:
    with dspy.context(trace=own):
        return fn(*args)


def _handle_batch(traces: AgentTraces, index: int, agent: Agent, batch: Sequence[Message]) -> None:
    with traces.recording(index):
        for message in batch:
            agent.handle(message)


def run_agents_concurrently(agents: Sequence[Agent], parallel: int, max_batches: int) -> int:
    """Deliver messages until no agent has anything pending and none is busy, letting up to
    ``parallel`` agents handle their pending batches at once. Returns the batches handled.

    An agent handles one batch at a time (its state is its own, never shared between threads);
    idle agents with pending messages start in agent order. Every new message comes from an
    agent's handler, so checking the queues each time a handler finishes misses none. The first
    handler to fail ends the conversation with its exception, as it would sequentially.
    The agents' role calls join DSPy's trace as :class:`AgentTraces` orders them.
    """
    busy: dict[Future[None], Agent] = {}
    traces = AgentTraces(len(agents))
    batches = 0
    with ParallelCalls(parallel) as calls:
        while True:
            for index, agent in enumerate(agents):
                if len(busy) >= parallel or batches >= max_batches:
                    break
                if agent in busy.values():
                    continue
                batch = agent.ctx.pool.take(agent.name)
                if batch:
                    busy[calls.submit(_handle_batch, traces, index, agent, batch)] = agent
                    batches += 1
            if not busy:
                break
            for future in calls.finished(busy):
                del busy[future]
                future.result()  # a failed handler: raise here, leaving the others to end
    traces.join()
    return batches
