"""Value types of spec models beyond the strict base (:class:`critiquelab.core.config.StrictModel`)."""

from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError


def _printable(text: str) -> str:
    # A newline or a NUL in a name would break every table, plot legend and file it appears in.
    if not text.isprintable():
        raise PydanticCustomError("name_printable", "holds a control character: {text}",
                                  {"text": ascii(text)[:80]})
    return text


PrintableName = Annotated[str, StringConstraints(min_length=1, max_length=100), AfterValidator(_printable)]
"""A name shown in tables and results and part of file names (an experiment's, a pipeline's
label): printable text of 1 to 100 characters."""
