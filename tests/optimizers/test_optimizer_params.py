"""Optimiser parameters are typed per optimiser: a setting the optimiser would ignore or reject
is one line naming it, before anything runs; valid ones arrive with their defaults."""

import pytest

from core.errors import UserError
from optimizers.compile import CompileConfig
from optimizers.optimizer_params import OPTIMIZER_PARAMS, optimizer_params


@pytest.mark.parametrize("optimizer, params, message", [
    ("bootstrap", {"max_bootstraped_demos": 2},
     "'max_bootstraped_demos' is not a bootstrap parameter; allowed: max_bootstrapped_demos, max_rounds"),
    ("traces", {"max_bootstrapped_demos": 2},
     "'max_bootstrapped_demos' is not a traces parameter; allowed: k"),
    ("traces", {"k": 0}, "traces parameter k: Input should be greater than or equal to 1"),
    ("mipro", {"auto": "extreme"}, "mipro parameter auto: Input should be 'light', 'medium' or 'heavy'"),
    ("mipro", {"num_candidates": 4},
     "mipro: num_candidates only apply with auto: null (auto: light sets its own budget)"),
    ("gepa", {"auto": "light", "max_metric_calls": 10}, "gepa: set auto or max_metric_calls, not both"),
    ("sgd", {}, "unknown optimizer 'sgd'; one of traces, bootstrap, mipro, gepa"),
])
def test_bad_parameters_are_one_line_naming_them(optimizer, params, message):
    with pytest.raises(UserError) as caught:
        CompileConfig(optimizer, params)
    assert str(caught.value) == message


def test_every_parameter_is_documented_and_defaults_fill_in():
    for model in OPTIMIZER_PARAMS.values():
        assert all(info.description for info in model.model_fields.values()), model
    assert optimizer_params("bootstrap", {}).model_dump() == {"max_bootstrapped_demos": 2, "max_rounds": 1}
    explicit = optimizer_params("mipro", {"auto": None, "num_candidates": 2, "num_trials": 3})
    assert (explicit.auto, explicit.num_candidates, explicit.num_trials) == (None, 2, 3)
