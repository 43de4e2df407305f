"""Splits: disjoint, deterministic, and scoring on optimisation problems is refused."""

import pytest

from optimizers.splits import SplitOverlapError, SplitSpec, make_split

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
    with pytest.raises(ValueError, match="exceed 1"):
        SplitSpec(train=0.8, val=0.5)


@pytest.mark.parametrize("ids, spec, sizes, empty", [
    (IDS[:4], SplitSpec(train=3, val=0.1), "3/0/1", "validation would be empty"),
    (IDS[:5], SplitSpec(train=3, val=2), "3/2/0", "test would be empty"),
    (IDS[:3], SplitSpec(train=3, val=1), "3/0/0", "validation and test would be empty"),
    (IDS[:3], SplitSpec(train=0.1, val=1), "0/1/2", "train would be empty"),
])
def test_a_split_with_an_empty_part_is_refused_with_the_sizes_it_would_give(ids, spec, sizes, empty):
    from core.errors import UserError

    with pytest.raises(UserError, match=f"give {sizes} train/validation/test problems; {empty}"):
        make_split(ids, spec)


def test_no_validation_part_is_refused_in_the_spec():
    with pytest.raises(ValueError, match="greater than 0"):
        SplitSpec(val=0)
