"""Failure attribution from the outcome models: each revising pipeline's problems land in one of
six places and each choosing pipeline's in one of three, decided by the figures of the group that
attributes them (never by which keys a stored result holds)."""

from __future__ import annotations

import pytest

from critiquelab.eval.program_identity import same_program
from critiquelab.eval.results import ProblemResult
from critiquelab.eval.verdict import Status
from critiquelab.pipelines.attribution import REVISION_ENDS, SELECTION_ENDS
from critiquelab.pipelines.registry import outcome_model, pipeline_names


def _result(passed: bool, **extra: object) -> ProblemResult:
    return ProblemResult(task_id="T/0", pipeline="p", seed=0,
                         status=Status.PASSED if passed else Status.FAILED, extra=extra)


# (final passed, figures) -> the place a revising pipeline's problem ended
REVISIONS = [
    (True, {"first_passed": True, "changes_requested": False}, "kept_passing"),
    (False, {"first_passed": True, "changes_requested": True, "final_unchanged": False}, "revision_broke"),
    (False, {"first_passed": False, "changes_requested": False, "final_unchanged": True}, "critic_miss"),
    (False, {"first_passed": False, "changes_requested": True, "final_unchanged": True}, "echo"),
    (False, {"first_passed": False, "changes_requested": True, "final_unchanged": False}, "repair_miss"),
    (True, {"first_passed": False, "changes_requested": True, "final_unchanged": False}, "fixed"),
    # reflexion asks for no review: its retry after failing visible examples is the revision asked for
    (False, {"first_passed": False, "changes_requested": False, "fixes": 2, "final_unchanged": True}, "echo"),
    # not attributable: no first version scored; a failed revision never compared with the draft
    (False, {"changes_requested": True}, None),
    (False, {"first_passed": False, "changes_requested": True}, None),
]


@pytest.mark.parametrize("pipeline", ["critic_loop", "self_refine", "reflexion", "sop", "architect"])
def test_a_revising_pipeline_s_problems_end_in_one_of_six_places(pipeline):
    model = outcome_model(pipeline)
    assert model.attribution_ends() == REVISION_ENDS
    results = [_result(passed, **figures) for passed, figures, _ in REVISIONS]
    assert model.attributions(results) == [end for _, _, end in REVISIONS]


@pytest.mark.parametrize(("pipeline", "candidates"), [
    ("vote", "samples_passed"), ("distinguish", "candidates_passed"), ("tree_search", "nodes_passed"),
    ("debate", "debaters_final_passed"),
])
def test_a_choosing_pipeline_s_problems_end_in_one_of_three_places(pipeline, candidates):
    model = outcome_model(pipeline)
    assert model.attribution_ends() == SELECTION_ENDS
    results = [_result(False, **{candidates: [False, False]}), _result(False, **{candidates: [False, True]}),
               _result(True, **{candidates: [True, False]}), _result(True, **{candidates: []}),
               _result(False)]
    assert model.attributions(results) == [
        "no_passing_candidate", "passing_not_chosen", "chosen_passing", "chosen_passing", None]


def test_only_pipelines_that_draft_and_revise_or_choose_attribute_their_problems():
    attributing = {name for name in pipeline_names() if outcome_model(name).attribution_ends()}
    assert attributing == set(pipeline_names()) - {"baseline"}
    baseline = outcome_model("baseline")
    assert baseline.attributions([_result(False, first_passed=False, samples_passed=[True])]) == [None]


@pytest.mark.parametrize(("a", "b", "same"), [
    ("def f(x):\n    return x + 1\n", "def f(x):\n\n    # add one\n    return x+1  # done\n", True),
    ("def f(x):\n    return x + 1\n", "def f(x):\n    return x + 2\n", False),
    ("def f(x):\n  return (\n", "def f(x):\n    return (  # broken\n", True),  # neither parses: text
    ("def f(x):\n    return 1\n", "def f(x):\n    return (\n", False),
])
def test_an_echo_is_the_same_program_whatever_its_formatting(a, b, same):
    assert same_program(a, b) is same
