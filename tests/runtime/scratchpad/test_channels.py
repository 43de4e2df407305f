"""Channel types and their rules, without a pool."""

import pytest
from pydantic import ValidationError

from critiquelab.runtime.scratchpad.channels import ChannelSpec, apply_delta, check_delta, size_bytes


def test_append_grows_replace_replaces_merge_updates_key_by_key():
    assert apply_delta("append", [1], 2) == [1, 2]
    assert apply_delta("append", [1, 2, 3], 4, dropped=2) == [3, 4]
    assert apply_delta("replace", "old", {"new": 1}) == {"new": 1}
    assert apply_delta("merge", {"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": 1, "b": 3, "c": 4}


def test_apply_delta_never_aliases_the_old_value_or_the_delta():
    old, delta = [{"x": 1}], {"y": [1]}
    new = apply_delta("append", old, delta)
    new[0]["x"] = 9
    new[1]["y"].append(2)
    assert old == [{"x": 1}] and delta == {"y": [1]}


def test_a_replace_channel_cannot_take_the_merge_policy():
    with pytest.raises(ValidationError, match="a replace channel holds one value and cannot merge"):
        ChannelSpec(name="code", type="replace", conflict_policy="merge")
    assert ChannelSpec(name="notes", type="merge", conflict_policy="merge").conflict_policy == "merge"


def test_check_delta_names_what_a_channel_takes():
    assert check_delta("merge", ["a"]) == "a merge channel takes a mapping of string keys to values"
    assert check_delta("append", object()).startswith("the value must be JSON-serialisable")
    assert check_delta("replace", {"fine": [1, "two"]}) == ""


def test_size_is_compact_json_bytes():
    assert size_bytes({"a": "é"}) == len('{"a":"é"}'.encode())
