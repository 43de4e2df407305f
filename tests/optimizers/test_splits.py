"""Splits: disjoint, deterministic, and scoring on optimisation problems is refused."""

import re

import pytest

from critiquelab.optimizers.splits import SplitOverlapError, SplitSpec, make_split

IDS = [f"HumanEval/{i}" for i in range(40)]


def test_split_is_disjoint_covers_everything_and_sized_by_spec():
    split = make_split(IDS, SplitSpec(seed=3, train=0.5, val=0.25))
    train, val, test = set(split.train), set(split.val), set(split.test)
    assert not (train & val) and not (train & test) and not (val & test)
    assert train | val | test == set(IDS)
    assert (len(train), len(val), len(test)) == (20, 10, 10)


def test_split_is_a_function_of_ids_and_seed_only():
    a = make_split(IDS, SplitSpec(seed=7))
    b = make_split(list(reversed(IDS)) + IDS[:3], SplitSpec(seed=7))  # order and duplicates ignored
    assert a == b and a.fingerprint == b.fingerprint
    c = make_split(IDS, SplitSpec(seed=8))
    assert c.train != a.train and c.fingerprint != a.fingerprint


def test_counts_instead_of_fractions():
    split = make_split(IDS, SplitSpec(seed=0, train=4, val=2))
    assert (len(split.train), len(split.val), len(split.test)) == (4, 2, 34)


def test_scoring_on_train_or_val_is_an_error_unless_allowed():
    split = make_split(IDS, SplitSpec(seed=1, train=10, val=5))
    split.check_scoring(split.test)  # fine
    with pytest.raises(SplitOverlapError, match="allow_overlap"):
        split.check_scoring([split.test[0], split.train[0]])
    with pytest.raises(SplitOverlapError):
        split.check_scoring([split.val[0]])
    split.check_scoring(split.train, allow_overlap=True)


def test_bad_fractions_are_rejected():
    with pytest.raises(ValueError, match="fractions must be below 1"):
        SplitSpec(train=0.8, val=0.5)


@pytest.mark.parametrize("ids, spec, sizes, empty", [
    (IDS[:4], SplitSpec(train=3, val=0.1), "3/0/1", "validation would be empty"),
    (IDS[:5], SplitSpec(train=3, val=2), "3/2/0", "test would be empty"),
    (IDS[:3], SplitSpec(train=3, val=1), "3/0/0", "validation and test would be empty"),
    (IDS[:3], SplitSpec(train=0.1, val=1), "0/1/2", "train would be empty"),
])
def test_a_split_with_an_empty_part_is_refused_with_the_sizes_it_would_give(ids, spec, sizes, empty):
    from critiquelab.core.errors import UserError

    with pytest.raises(UserError, match=f"give {sizes} train/validation/test problems; {empty}"):
        make_split(ids, spec)


def test_no_validation_part_is_refused_in_the_spec():
    with pytest.raises(ValueError, match="a count must be at least 1"):
        SplitSpec(val=0)


@pytest.mark.parametrize("values, problem", [
    ({"seed": True}, "Input should be a valid integer"),  # strict: a boolean is no seed
    ({"seed": "3"}, "Input should be a valid integer"),
    ({"allow_overlap": "yes"}, "Input should be a valid boolean"),
    ({"allow_overlap": 1}, "Input should be a valid boolean"),
    ({"val": "0.25"},
     "expected a count (a whole number, at least 1) or a fraction between 0 and 1, got '0.25' (a number "
     "in quotes is text"),
    ({"train": "5e-1"}, "got '5e-1' (YAML reads 5e-1 as text: write 0.5)"),
    ({"train": True}, "got true"),
    ({"train": None}, "got null"),
    ({"train": 1.5}, "a fraction must be between 0 and 1, exclusive (got 1.5)"),  # was a count of 1
    ({"train": 3.0}, "a fraction must be between 0 and 1, exclusive (got 3.0)"),  # a count is written 3
    ({"train": 1.0}, "(got 1.0)"),
    ({"train": 0.0}, "(got 0.0)"),
    ({"train": float("nan")}, "(got nan)"),
    ({"val": float("inf")}, "(got inf)"),
    ({"train": 0}, "a count must be at least 1 (got 0)"),
    ({"train": -2}, "a count must be at least 1 (got -2)"),
])
def test_a_split_is_taken_as_written_never_converted(values, problem):
    """Strict like the rest of a spec: a part's size is a whole count or a fraction, never a
    number that could be read as either, and no value of another type is converted."""
    with pytest.raises(ValueError, match=re.escape(problem)):
        SplitSpec.model_validate(values)


def test_counts_and_fractions_mean_what_they_say():
    assert make_split(IDS, SplitSpec(train=1, val=0.5)).train.__len__() == 1  # 1 is one problem
    assert len(make_split(IDS, SplitSpec(train=0.1, val=2)).val) == 2


def test_a_test_part_given_apart_is_the_test_and_train_val_come_from_the_rest():
    dev, held_out = IDS[0::2], IDS[1::2]
    split = make_split(dev, SplitSpec(seed=2, train=8, val=8, test="test_half"), test_ids=held_out)
    assert split.test == tuple(held_out)  # all of it, in the order given
    assert set(split.train) | set(split.val) <= set(dev) and len(split.train) == len(split.val) == 8
    assert split.train == make_split(dev, SplitSpec(seed=2, train=8, val=8)).train  # same draw as `rest`
    split.check_scoring(split.test)


def test_a_test_part_given_apart_that_overlaps_train_or_val_is_refused():
    split = make_split(IDS, SplitSpec(seed=2, train=30, val=5, test="test_half"), test_ids=IDS[1::2])
    with pytest.raises(SplitOverlapError, match="allow_overlap"):
        split.check_scoring(split.test)
