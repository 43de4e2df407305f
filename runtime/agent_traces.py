"""The order of a pipeline's role calls in DSPy's trace, independent of which call returned first.

DSPy appends each predictor call to the trace in effect (an optimiser's, while it runs a program
on a train example; otherwise DSPy's default one) when the call returns, and BootstrapFewShot
picks a role's demo by its position among that role's calls in a run. Calls made in threads would
therefore put the demo at the mercy of timing — measured: a teacher run of vote's sampler whose
demo for one train problem was a failing sample (dropped by the demo filter), and whose replay
from the same cached answers took a passing one. So concurrent calls record on lists of their
own, and those join the caller's trace in an order fixed by the program, not by the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import zip_longest
from typing import Any

import dspy

_NO_CALL = object()  # an agent with fewer calls than another, in AgentTraces' turn-by-turn join


def join_trace(caller_trace: list[Any], entries: Iterable[Any]) -> None:
    """Append ``entries`` to ``caller_trace`` within DSPy's bound on a trace (each traced call
    drops the oldest entry past it)."""
    caller_trace.extend(entries)
    del caller_trace[: max(0, len(caller_trace) - dspy.settings.max_trace_size)]


class AgentTraces:
    """Each of a conversation's agents records its role calls on a list of its own; :meth:`join`
    adds them to the trace in effect when this was made, in turns, agent by agent: every agent's
    first call in agent order, then every second call, and so on. An agent's own calls depend only
    on the messages it was sent (see :mod:`critiquelab.runtime.parallel_agents`), so the joined trace is the
    same whether the agents ran one after another or several at once, and in whatever order."""

    def __init__(self, agents: int) -> None:
        self._caller: list[Any] | None = dspy.settings.trace
        self._calls: list[list[Any]] = [[] for _ in range(agents)]

    @contextmanager
    def recording(self, agent: int) -> Iterator[None]:
        """Role calls made inside go on agent ``agent``'s list (nothing when tracing is off)."""
        if self._caller is None:
            yield
            return
        with dspy.context(trace=self._calls[agent]):
            yield

    def join(self) -> None:
        if self._caller is not None:
            turns = zip_longest(*self._calls, fillvalue=_NO_CALL)
            join_trace(self._caller, (call for turn in turns for call in turn if call is not _NO_CALL))
