"""How many problems the Ray executor hands a worker per call.

One Ray call per problem costs a round trip, a task submission and the driver's attention for
every problem; with a fast endpoint that is a sizeable share of a problem's harness time. Larger
batches amortise it, but a lost worker loses its whole batch (solved again elsewhere) and a large
batch at the end of a run leaves the other workers idle. So a batch aims at a short, fixed amount
of work per call (``execution.batch_target_s``), measured as the run goes: one problem at first,
then as many as fit that time at the per-problem time observed so far (at most
``execution.max_batch``).
"""

from __future__ import annotations

import math

# Weight of the newest batch in the per-problem time (an exponential average): one slow problem
# moves the estimate but does not decide it alone.
_SMOOTHING = 0.5


class BatchSizer:
    """Batch sizes from the per-problem time observed so far (pure logic, no Ray): about
    ``target_s`` of work per call, at most ``max_problems``."""

    def __init__(self, target_s: float, max_problems: int) -> None:
        self._target_s = target_s
        self._max_problems = max_problems
        self._per_problem_s: float | None = None  # None: nothing measured yet
        self._last_size = 1

    @property
    def per_problem_s(self) -> float | None:
        return self._per_problem_s

    def observe(self, problems: int, seconds: float) -> None:
        """A batch of ``problems`` took ``seconds`` of a worker's time."""
        if problems <= 0:
            return
        sample = max(seconds, 0.0) / problems
        if self._per_problem_s is None:
            self._per_problem_s = sample
        else:
            self._per_problem_s = _SMOOTHING * sample + (1 - _SMOOTHING) * self._per_problem_s

    def next_size(self, remaining: int, places: int = 1) -> int:
        """The size of the next batch, with ``remaining`` problems queued and ``places`` calls
        the cluster solves at once: never more than an equal share of what is left (a large last
        batch would keep one worker busy while the others idle), and at most double the previous
        size, so one fast first problem (a cached or trivial one) cannot hand out the maximum."""
        if remaining <= 0:
            return 0
        if self._per_problem_s is None:
            wanted = 1
        elif self._per_problem_s == 0:
            wanted = self._max_problems
        else:
            wanted = max(1, math.floor(self._target_s / self._per_problem_s))
        wanted = min(wanted, self._max_problems, 2 * self._last_size)
        equal_share = math.ceil(remaining / max(places, 1))
        size = max(1, min(wanted, equal_share))
        self._last_size = size
        return size
