"""The base of every spec model: unknown keys are errors and values are taken as written (a typo
or a quoted number must not silently fall back to a default or be coerced)."""

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
