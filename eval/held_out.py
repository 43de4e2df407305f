"""The held-out protocol: one fixed split of any dataset into a ``dev`` half and a ``test`` half.

The rule: in the dataset's own order (file order; HumanEval's is by task number), the problems
at even positions (0, 2, 4, …) are ``dev`` and those at odd positions ``test`` — for HumanEval,
the even and the odd task numbers, 82 problems each. There is no seed on purpose: every run,
pipeline and person gets the same halves, so a pipeline or prompt chosen by looking at ``dev``
results can be reported once on ``test`` problems it was never tuned on. ``all`` is every problem.

The split is applied to the validated dataset before ``task_ids`` and ``limit`` select from it.
It changes which problems run, never a problem's result, so it is not part of any checkpoint key.
(``critiquelab.optimizers.splits`` is another thing: the optimiser's seeded train/val/test split of whatever
problems the spec selected.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from critiquelab.eval.problems import Problem

SplitName = Literal["all", "dev", "test"]
SPLIT_RULE = "dev = even positions (0, 2, 4, …) in the dataset's order, test = odd positions"


def select_split(problems: Sequence[Problem], split: SplitName) -> list[Problem]:
    """The problems of ``split``, in dataset order."""
    if split == "all":
        return list(problems)
    first = 0 if split == "dev" else 1
    return list(problems[first::2])
