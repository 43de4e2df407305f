"""The selection rules of ``distinguish``, as plain functions of what the candidates did, so a
finished run's recorded outcomes and judgements replay them without a model call
(``benchmarks/distinguishing_replay.py``).

Candidates are numbered 0 (the greedy answer) and ``i + 1`` (sample ``i``). A candidate's
outcomes are its calls' :data:`critiquelab.eval.generated_inputs.Outcome` on the visible examples' inputs,
then on the generated inputs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from critiquelab.eval.generated_inputs import Outcome
from critiquelab.eval.generated_tests import consensus_sets
from critiquelab.signatures.pairwise_judge import Choice

Selection = Literal["pairwise", "agreement", "both"]
InputSource = Literal["writer", "mutation", "both"]  # where the inputs that tell candidates apart come from
SELECTIONS: tuple[str, ...] = get_args(Selection)
GREEDY = 0  # the greedy answer's candidate number
_SHOWN_CHARS = 400  # a judge reads an output up to this long (a huge list says nothing more)


@dataclass(frozen=True)
class Group:
    """Candidates that behaved identically on every input."""

    members: list[int]  # candidate numbers, ascending
    outcomes: tuple[Outcome, ...]  # on the visible inputs, then the generated ones
    visible_passed: tuple[bool, ...]  # per visible example: returned its expected value

    @property
    def answer(self) -> int:
        """The program the group answers with (:func:`answer_of` its members)."""
        return answer_of(self.members)


def behaviour_groups(
    outcomes: Mapping[int, tuple[Outcome, ...]], visible_passed: Mapping[int, tuple[bool, ...]]
) -> list[Group]:
    """The candidates grouped by their outcomes; the greedy answer's group first, then the others
    by size (largest first; ties to the group whose first member comes first)."""
    by_behaviour: dict[tuple[Outcome, ...], list[int]] = {}
    for candidate in sorted(outcomes):
        by_behaviour.setdefault(outcomes[candidate], []).append(candidate)
    groups = [Group(members, behaviour, visible_passed[members[0]])
              for behaviour, members in by_behaviour.items()]
    return sorted(groups, key=lambda g: (GREEDY not in g.members, -len(g.members), g.members[0]))


def disagreements(groups: Sequence[Group], visible: int) -> int:
    """Generated inputs (those after the first ``visible`` outcomes) on which the groups differ."""
    if not groups:
        return 0
    width = len(groups[0].outcomes)
    return sum(len({g.outcomes[i] for g in groups}) > 1 for i in range(visible, width))


def distinguishing_input(a: Group, b: Group, visible: int) -> int:
    """The input on which two groups differ that a judge is shown: the first generated one, else
    the first visible one (groups differ somewhere, or they would be one group)."""
    width = len(a.outcomes)
    order: list[int] = [*range(visible, width), *range(visible)]  # mypy infers list[Any] unannotated
    return next(i for i in order if a.outcomes[i] != b.outcomes[i])


def describe(outcome: Outcome) -> str:
    """An outcome as a judge reads it."""
    kind, detail = outcome
    if kind == "returned":
        return detail if len(detail) <= _SHOWN_CHARS else detail[:_SHOWN_CHARS] + " …"
    if kind == "raised":
        return f"raises {detail}"
    if kind == "timed_out":
        return "does not finish (timed out)"
    return f"fails to run ({detail})"


@dataclass
class Tournament:
    """S*'s adaptive pairwise selection over ordered groups: the first group (A) meets the next
    (B) on an input where they differ, the judge's choice meets the one after, and so on. A
    judgement that is no readable choice (None) keeps the current winner. Driven one judgement at
    a time, so the agents can ask the judge through the pool and a replay can feed recorded ones."""

    groups: Sequence[Group]
    visible: int
    winner: int = 0  # index into groups
    challenger: int = 1

    def pending(self) -> tuple[Group, Group, int] | None:
        """The next comparison — (A, B, the input shown) — or None when the tournament is over."""
        if self.challenger >= len(self.groups):
            return None
        a, b = self.groups[self.winner], self.groups[self.challenger]
        return a, b, distinguishing_input(a, b, self.visible)

    def judged(self, choice: Choice | None) -> None:
        if choice == "B":
            self.winner = self.challenger
        self.challenger += 1

    @property
    def chosen(self) -> Group:
        return self.groups[self.winner]


def pseudo_labels(groups: Sequence[Group], visible: int) -> list[Outcome]:
    """Per generated input, the outcome most candidates have (ties to the earlier group): the
    expected value the writer did not give, taken from the candidates' majority."""
    width = len(groups[0].outcomes) if groups else 0
    labels = []
    for i in range(visible, width):
        votes: Counter[Outcome] = Counter()
        for group in groups:
            votes[group.outcomes[i]] += len(group.members)
        labels.append(max(votes, key=votes.__getitem__))  # the first of the most common: groups' order
    return labels


def agreement_winner(groups: Sequence[Group], visible: int) -> list[int]:
    """CodeT's dual agreement over the visible examples (with their expected values) and the
    generated inputs labelled by :func:`pseudo_labels`: the members of the best consensus set —
    candidates passing the same tests — scored by (candidates in it) × (tests passed)."""
    labels = pseudo_labels(groups, visible)
    members = sorted(m for g in groups for m in g.members)
    row_of = {m: g for g in groups for m in g.members}
    matrix = [[*row_of[m].visible_passed, *(row_of[m].outcomes[visible + j] == label
                                            for j, label in enumerate(labels))] for m in members]
    best = consensus_sets(matrix)[0]
    return [members[i] for i in best.samples]


def answer_of(members: Sequence[int]) -> int:
    """The greedy answer if it is among ``members``, else the first of them."""
    return GREEDY if GREEDY in members else min(members)


def combined_answer(groups: Sequence[Group], pairwise: Group, agreement: Sequence[int]) -> int:
    """``both``: the first group's answer stands unless the judge's winner is another group and
    the agreement winner holds a member of it — a replacement needs both rules behind it."""
    if pairwise.members != groups[0].members and set(pairwise.members) & set(agreement):
        return pairwise.answer
    return groups[0].answer
