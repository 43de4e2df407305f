"""The execution settings: which ones only the Ray executor reads, and their refusal under local."""

import pytest
from pydantic import ValidationError

from critiquelab.experiments.spec.execution import RAY_ONLY, ExecutionSpec
from critiquelab.pipelines.params import marked_fields

# A value other than the default, valid for each Ray setting.
_SET = {"address": "head:6379", "max_retries": 5, "in_flight_per_node": 8, "workers_per_node": 2,
        "batch_target_s": 1.0, "max_batch": 4, "allow_mixed_isolation": True}


def test_the_marked_settings_are_the_ones_documented_as_ray_only():
    documented = {name for name, field in ExecutionSpec.model_fields.items()
                  if (field.description or "").startswith("ray only:")}
    assert marked_fields(ExecutionSpec, RAY_ONLY) == documented == set(_SET)


@pytest.mark.parametrize("name", sorted(_SET))
def test_each_ray_setting_is_refused_under_local_and_taken_under_ray(name):
    with pytest.raises(ValidationError, match=f"{name}: Ray settings, ignored by executor 'local'"):
        ExecutionSpec.model_validate({name: _SET[name]})
    assert getattr(ExecutionSpec.model_validate({"executor": "ray", name: _SET[name]}), name) == _SET[name]


def test_a_ray_setting_at_its_default_is_no_setting():
    # A logged config.yaml spells every field out; a local run's must load again.
    spelled_out = ExecutionSpec().model_dump()
    assert ExecutionSpec.model_validate(spelled_out) == ExecutionSpec()
