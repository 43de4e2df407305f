"""What an executor needs to solve one pipeline × seed's problems, and what an executor does."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult
from critiquelab.runtime.pool.message_pool import MessagePool


@dataclass(frozen=True)
class SolveJob:
    """One child run's work: the built pipeline, the LM (seeded), and how results are labelled."""

    pipeline: Any  # dspy.Module
    lm: Any  # critiquelab.experiments.serving.lm.HarnessLM
    label: str
    seed: int
    timeout_s: float  # per hidden-test run
    run_id: str  # the MLflow child run its messages belong to
    # Roles the spec gives an LM of their own (model or temperature): role name -> LM.
    role_lms: Mapping[str, Any] = field(default_factory=dict)
    # Problems one at a time, in order: a pipeline with memory learns from the problems before.
    in_order: bool = False


class Executor(Protocol):
    def check(self) -> None:
        """Refuse bad input that can be seen without starting anything (an address nothing answers
        at), so a refused start writes nothing — it runs before the model servers start."""

    def start(self) -> None:
        """Get ready to solve (idempotent); bad input (an unreachable cluster) fails here."""

    def solve(
        self, job: SolveJob, problems: list[Problem], pool: MessagePool
    ) -> Generator[ProblemResult, None, None]:
        """Yield results as problems finish; every message a problem published is in ``pool``
        before its result is yielded. Closing the iterator stops the problems in flight."""

    def close(self) -> None: ...
