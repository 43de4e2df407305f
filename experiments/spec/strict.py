"""The base of every spec model: unknown keys are errors and values are taken as written (a typo
or a quoted number must not silently fall back to a default or be coerced)."""

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints
from pydantic_core import PydanticCustomError


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _printable(text: str) -> str:
    # A newline or a NUL in a name would break every table, plot legend and file it appears in.
    if not text.isprintable():
        raise PydanticCustomError("name_printable", "holds a control character: {text}",
                                  {"text": ascii(text)[:80]})
    return text


PrintableName = Annotated[str, StringConstraints(min_length=1, max_length=100), AfterValidator(_printable)]
"""A name shown in tables and results and part of file names (an experiment's, a pipeline's
label): printable text of 1 to 100 characters."""
