"""A role call's outputs read as attributes checked against the role's signature."""

from __future__ import annotations

import copy
import pickle

import pytest

from critiquelab.runtime.role_call import RoleResult, UndeclaredOutputError

FIELDS = ("verdict", "findings", "summary")


def _result(**outputs: object) -> RoleResult:
    return RoleResult("critic", {"code": "x"}, dict(outputs), signature="Critic", output_fields=FIELDS)


def test_a_declared_output_reads_as_an_attribute() -> None:
    step = _result(verdict="approve", findings=[], summary="fine")
    assert (step.verdict, step.findings, step.summary) == ("approve", [], "fine")


def test_an_undeclared_name_raises_naming_the_signature_and_its_outputs() -> None:
    step = _result(verdict="approve")
    with pytest.raises(UndeclaredOutputError, match=r"Critic has no output 'verdcit'; its outputs: verdict"):
        _ = step.verdcit
    with pytest.raises(AttributeError):
        step.output("revised_code")
    assert not hasattr(step, "get")  # no reads by string key that silently give None


def test_an_unparsed_reply_reads_none_for_every_declared_output() -> None:
    step = RoleResult("critic", {}, raw="garbled", parsed=False, signature="Critic", output_fields=FIELDS)
    assert step.verdict is None and step.output("summary") is None and step.raw == "garbled"


def test_an_output_named_like_a_field_is_read_with_output() -> None:
    step = RoleResult("input_writer", {"prompt": "p"}, {"inputs": ["f(1)"]}, signature="InputWriter",
                      output_fields=("inputs",))
    assert step.inputs == {"prompt": "p"} and step.output("inputs") == ["f(1)"]
    assert step.declares("inputs") and not step.declares("code")


def test_a_result_copies_and_pickles() -> None:
    step = _result(verdict="approve")
    for again in (copy.deepcopy(step), pickle.loads(pickle.dumps(step))):
        assert again == step and again.verdict == "approve"
