"""distinguish's selection rules on hand-made outcomes: group order, the tournament, agreement
with majority labels, and ``both`` needing the two to concur."""

from critiquelab.pipelines.distinguish.selection import (
    Tournament,
    agreement_winner,
    behaviour_groups,
    combined_answer,
    describe,
    disagreements,
    distinguishing_input,
    pseudo_labels,
)

# One visible input (index 0), then two generated ones.
THREE, FOUR, FIVE, ZERO = ("returned", "3"), ("returned", "4"), ("returned", "5"), ("returned", "0")
RAISES = ("raised", "ZeroDivisionError")


def _groups(table):
    return behaviour_groups(table, {c: (True,) for c in table})


def test_the_greedy_answers_group_comes_first_then_the_largest():
    groups = _groups({0: (THREE, THREE, THREE), 1: (THREE, FOUR, ZERO), 2: (THREE, FIVE, ZERO),
                      3: (THREE, FOUR, ZERO), 4: (THREE, FIVE, ZERO), 5: (THREE, FOUR, ZERO)})
    assert [g.members for g in groups] == [[0], [1, 3, 5], [2, 4]]
    assert [g.answer for g in groups] == [0, 1, 2]
    assert disagreements(groups, visible=1) == 2
    # Without the greedy answer the largest leads; equal sizes go to the earlier first member.
    assert [g.members for g in _groups({2: (FOUR,), 1: (FIVE,), 3: (FOUR,)})] == [[2, 3], [1]]
    assert [g.members for g in _groups({2: (FOUR,), 1: (FIVE,)})] == [[1], [2]]


def test_the_judge_is_shown_a_generated_input_before_a_visible_one():
    a, b = _groups({0: (THREE, FOUR, FOUR), 1: (FOUR, FOUR, FIVE)})
    assert distinguishing_input(a, b, visible=1) == 2
    a, b = _groups({0: (THREE, FOUR), 1: (FOUR, FOUR)})
    assert distinguishing_input(a, b, visible=1) == 0  # they differ only on the visible input


def test_the_tournament_winner_meets_the_next_group_and_no_readable_choice_keeps_it():
    groups = _groups({0: (THREE, THREE), 1: (THREE, FOUR), 2: (THREE, FOUR), 3: (THREE, FIVE)})
    tournament = Tournament(groups, visible=1)
    asked = []
    for choice in ("B", None):
        a, b, shown = tournament.pending()
        asked.append((a.members, b.members, shown))
        tournament.judged(choice)
    assert tournament.pending() is None and tournament.chosen.members == [1, 2]
    assert asked == [([0], [1, 2], 1), ([1, 2], [3], 1)]


def test_agreement_labels_each_input_with_the_majority_and_scores_consensus_sets():
    # Greedy alone says 3 twice; three candidates say 4, 0; one says 4, 5 (half right by majority).
    groups = _groups({0: (THREE, THREE, THREE), 1: (THREE, FOUR, ZERO), 2: (THREE, FOUR, ZERO),
                      3: (THREE, FOUR, ZERO), 4: (THREE, FOUR, FIVE)})
    assert pseudo_labels(groups, visible=1) == [FOUR, ZERO]
    assert agreement_winner(groups, visible=1) == [1, 2, 3]
    # A tie in votes goes to the earlier group (the greedy answer's).
    tied = _groups({0: (THREE, RAISES), 1: (THREE, FOUR)})
    assert pseudo_labels(tied, visible=1) == [RAISES] and agreement_winner(tied, visible=1) == [0]


def test_both_replaces_the_first_group_only_when_judge_and_agreement_concur():
    groups = _groups({0: (THREE, THREE), 1: (THREE, FOUR), 2: (THREE, FOUR), 3: (THREE, FIVE)})
    first, adders, other = groups
    assert combined_answer(groups, adders, [1, 2]) == 1
    assert combined_answer(groups, adders, [3]) == 0  # agreement prefers another group
    assert combined_answer(groups, first, [1, 2]) == 0  # the judge kept the first group
    assert combined_answer(groups, other, [0, 3]) == 3


def test_outcomes_read_as_a_judge_sees_them():
    assert describe(FOUR) == "4" and describe(RAISES) == "raises ZeroDivisionError"
    assert describe(("timed_out", "timeout")) == "does not finish (timed out)"
    assert describe(("failed", "unsupported_return")) == "fails to run (unsupported_return)"
    assert describe(("returned", "x" * 1000)).endswith(" …") and len(describe(("returned", "x" * 1000))) < 420
