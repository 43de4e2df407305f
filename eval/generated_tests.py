"""Model-written tests as a selection signal (CodeT's dual execution agreement), and how good
those tests are.

A generated test is an assert line ``assert f(args) == literal``, parsed like the assert
examples a prompt shows (:mod:`critiquelab.eval.visible_examples`): its arguments are evaluated inside the
sandbox, its expected value is a literal compared on the trusted side, so a model-written test
never runs as trusted code. Asserts of any other shape are dropped (counted, never run).

CodeT (arXiv 2207.10397) scores a *consensus set* — samples that pass exactly the same tests —
by (samples in it) × (tests they pass) and answers with a sample of the best set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from critiquelab.eval.assembly import assemble_program
from critiquelab.eval.problems import Problem
from critiquelab.eval.visible_examples import VisibleExample, example_passes, visible_examples


def parse_asserts(text: str, entry_point: str, limit: int | None = None) -> list[VisibleExample]:
    """The ``assert entry_point(args) == literal`` lines of ``text``, duplicates dropped, at most
    ``limit`` of them (in the order written)."""
    asserts = "\n".join(line for line in text.splitlines() if line.strip().startswith("assert "))
    tests = visible_examples(asserts, entry_point)
    return tests[:limit] if limit is not None else tests


def render_tests(tests: Sequence[VisibleExample]) -> str:
    """Tests as the assert lines they were parsed from (for messages and for the QA report)."""
    return "\n".join(f"assert {test.call} == {test.expected}" for test in tests)


def pass_matrix(
    prompt: str, entry_point: str, codes: Sequence[str], tests: Sequence[VisibleExample],
    *, timeout_s: float = 5.0,
) -> list[list[bool]]:
    """``matrix[i][j]``: does candidate ``i`` pass test ``j``? A candidate that does not compile
    passes nothing. Each candidate runs all tests in one sandboxed session."""
    matrix = []
    for code in codes:
        program = assemble_program(prompt, code, entry_point)
        if not program.ok or not tests:
            matrix.append([False] * len(tests))
        else:
            matrix.append(example_passes(program.source, entry_point, list(tests), timeout_s=timeout_s))
    return matrix


@dataclass(frozen=True)
class ConsensusSet:
    """Samples that pass exactly the same tests; ``score`` = len(samples) × tests_passed."""

    samples: list[int]
    tests_passed: int

    @property
    def score(self) -> int:
        return len(self.samples) * self.tests_passed


def consensus_sets(matrix: Sequence[Sequence[bool]]) -> list[ConsensusSet]:
    """The consensus sets of a pass matrix, best first: highest score, ties to the set whose
    first sample comes first (sample order is seed order, so the choice is reproducible)."""
    groups: dict[tuple[bool, ...], list[int]] = {}
    for index, row in enumerate(matrix):
        groups.setdefault(tuple(row), []).append(index)
    found = [ConsensusSet(samples, sum(row)) for row, samples in groups.items()]
    return sorted(found, key=lambda s: (-s.score, s.samples[0]))


def canonical_passes(
    problem: Problem, tests: Sequence[VisibleExample], *, timeout_s: float = 5.0
) -> list[bool] | None:
    """Which generated tests the dataset's reference solution passes — the tests' accuracy.
    Scoring only, after the run; None when the dataset has no reference solution."""
    if problem.canonical_solution is None:
        return None
    return pass_matrix(problem.prompt, problem.entry_point, [problem.canonical_solution], tests,
                       timeout_s=timeout_s)[0]
