"""Failure attribution: where each problem ended, in the terms of how its pipeline works.

A pipeline that drafts and revises ends a problem in one of six places, decided from its first
version's and its final code's hidden-test results (scored after the run) and what its reviews
asked for; a pipeline that chooses among candidates in one of three, decided from every
candidate's hidden-test result. The figure groups that hold those figures classify their rows
with these functions (``FigureGroup.attribute``), so compare asks a pipeline's outcome model and
never guesses from a table's columns. Nothing here reaches a prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

RevisionEnd = Literal["kept_passing", "revision_broke", "critic_miss", "echo", "repair_miss", "fixed"]
REVISION_ENDS: tuple[RevisionEnd, ...] = (
    "kept_passing", "revision_broke", "critic_miss", "echo", "repair_miss", "fixed",
)
SelectionEnd = Literal["no_passing_candidate", "passing_not_chosen", "chosen_passing"]
SELECTION_ENDS: tuple[SelectionEnd, ...] = ("no_passing_candidate", "passing_not_chosen", "chosen_passing")

MEANINGS = {
    "kept_passing": "the first version passed and the final one still does",
    "revision_broke": "the first version passed and a revision broke it",
    "critic_miss": "the first version failed and no review asked for a change (the critic approved it)",
    "echo": "changes were asked for, and the final code is the failing first version again "
            "(formatting and comments aside)",
    "repair_miss": "changes were asked for, and the code changed but still fails",
    "fixed": "the first version failed and the final one passes",
    "no_passing_candidate": "no candidate passed the hidden tests",
    "passing_not_chosen": "a candidate passed, and the answer was another",
    "chosen_passing": "the answer passes",
}


def revision_end(
    first_passed: bool | None, final_passed: bool, *, revision_asked: bool, unchanged: bool | None,
) -> RevisionEnd | None:
    """Where a drafted and revised problem ended; None when its first version was not scored, or
    when it failed after a revision whose code was not compared with the first (a stored result
    from before that comparison)."""
    if first_passed is None:
        return None
    if first_passed:
        return "kept_passing" if final_passed else "revision_broke"
    if final_passed:
        return "fixed"
    if not revision_asked:
        return "critic_miss"
    if unchanged is None:
        return None
    return "echo" if unchanged else "repair_miss"


def selection_end(final_passed: bool, candidates_passed: Sequence[bool] | None) -> SelectionEnd | None:
    """Where a problem of a pipeline that chooses among candidates ended; None without candidate
    scores. An answer that passes is ``chosen_passing`` even when no candidate did (a judge's
    merge)."""
    if candidates_passed is None:
        return None
    if final_passed:
        return "chosen_passing"
    return "passing_not_chosen" if any(candidates_passed) else "no_passing_candidate"
