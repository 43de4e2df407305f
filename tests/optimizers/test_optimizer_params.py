"""Optimiser parameters are typed per optimiser: a setting the optimiser would ignore or reject
is one line naming it, before anything runs; valid ones arrive with their defaults."""

import pytest

from critiquelab.core.errors import UserError
from critiquelab.optimizers.compile import CompileConfig
from critiquelab.optimizers.optimizer_params import OPTIMIZER_PARAMS, optimizer_params


@pytest.mark.parametrize("optimizer, params, message", [
    ("bootstrap", {"max_bootstraped_demos": 2},
     "optimizer 'bootstrap': params.max_bootstraped_demos: unknown field; "
     "allowed: max_bootstrapped_demos, max_rounds"),
    ("traces", {"max_bootstrapped_demos": 2},
     "optimizer 'traces': params.max_bootstrapped_demos: unknown field; allowed: k"),
    ("traces", {"k": 0}, "optimizer 'traces': params.k: must be >= 1 (got 0)"),
    ("mipro", {"auto": "extreme"},
     "optimizer 'mipro': params.auto: must be one of light, medium, heavy (got 'extreme')"),
    ("mipro", {"num_candidates": 4},
     "optimizer 'mipro': params: num_candidates only apply with auto: null "
     "(auto: light sets its own budget)"),
    ("gepa", {"auto": "light", "max_metric_calls": 10},
     "optimizer 'gepa': params: set auto or max_metric_calls, not both"),
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
