"""What the options of ``critiquelab run`` (and the Python API's ``overrides=``) change in a spec:
one typed model, applied in one place.

Overrides are written into the spec's raw data before it is validated, so each value is checked
by the very rule that checks the field it replaces; a value that fails is blamed on its option
(``--limit 0: must be >= 1``) rather than on a spec file that does not contain it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from critiquelab.core.config import describe
from critiquelab.core.errors import FieldError, UserError
from critiquelab.eval.formats import FormatName
from critiquelab.eval.held_out import SPLIT_RULE, SplitName


@dataclass(frozen=True)
class _Replaces:
    """The spec field (its path) an override's value replaces."""

    path: tuple[str, ...]


class RunOverrides(BaseModel):
    """Values that replace a spec's for one run or estimate; None (the default) keeps the spec's.

    Each field is the ``critiquelab run`` option of the same name (``task_ids`` is
    ``--task-ids``). From Python: ``run(spec, overrides=RunOverrides(limit=5, seeds=[0, 1]))``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Annotated[str | None, _Replaces(("model", "id"))] = Field(
        default=None, description="model.id: 'local', 'local-1.5b' or a LiteLLM model string."
    )
    api_base: Annotated[str | None, _Replaces(("model", "api_base"))] = Field(
        default=None, description="model.api_base: the endpoint URL of a LiteLLM model."
    )
    api_key_env: Annotated[str | None, _Replaces(("model", "api_key_env"))] = Field(
        default=None, description="model.api_key_env: the environment variable holding the API key."
    )
    request_timeout: Annotated[float | None, _Replaces(("model", "timeout_s"))] = Field(
        default=None, description="model.timeout_s: seconds one model request may take."
    )
    dataset: Annotated[str | Path | None, _Replaces(("dataset", "source"))] = Field(
        default=None, description="dataset.source: 'humaneval', a dataset file or directory, or hf://OWNER/NAME."
    )
    format: Annotated[FormatName | None, _Replaces(("dataset", "format"))] = Field(
        default=None, description="dataset.format: how the dataset's rows become problems."
    )
    split: Annotated[SplitName | None, _Replaces(("dataset", "split"))] = Field(
        default=None, description=f"dataset.split: the held-out half to run on ({SPLIT_RULE})."
    )
    limit: Annotated[int | None, _Replaces(("dataset", "limit"))] = Field(
        default=None, description="dataset.limit: only the first N problems."
    )
    task_ids: Annotated[list[str] | None, _Replaces(("dataset", "task_ids"))] = Field(
        default=None, description="dataset.task_ids: only these problems."
    )
    seeds: Annotated[list[int] | None, _Replaces(("seeds",))] = Field(
        default=None, description="seeds: the seeds each pipeline runs with."
    )
    concurrency: Annotated[int | None, _Replaces(("concurrency",))] = Field(
        default=None, description="concurrency: problems solved at once."
    )
    parallel_runs: Annotated[int | None, _Replaces(("parallel_runs",))] = Field(
        default=None, description="parallel_runs: child runs (pipeline × seed) solved at once."
    )
    prompts: Annotated[str | Path | None, _Replaces(("prompts",))] = Field(
        default=None, description="prompts: exported prompts loaded into every pipeline."
    )
    strict: Annotated[bool | None, _Replaces(("strict",))] = Field(
        default=None, description="strict: refuse to report a run with unusable replies (exit 3)."
    )
    ray: Annotated[str | None, _Replaces(("execution", "address"))] = Field(
        default=None,
        description="execution.address, with execution.executor set to 'ray': the Ray cluster to "
        "solve on ('auto', host:6379 or ray://host:10001).",
    )

    def _given(self) -> list[tuple[str, tuple[str, ...], Any]]:
        """(name, spec path, value) of every override that is set, values as a spec holds them.
        An empty one (``--api-key-env ''``) is refused: it would read as not given, and the spec's
        value (or none) would be used without a word."""
        given = []
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if isinstance(value, str | Path) and not str(value).strip():
                raise UserError(f"{option_text(name, str(value))}: an empty value; leave the option out "
                                "to keep the spec's")
            if value is not None:
                (target,) = (m for m in field.metadata if isinstance(m, _Replaces))
                given.append((name, target.path, str(value) if isinstance(value, Path) else value))
        return given

    def apply(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """``data`` (a spec's raw mapping, left unchanged) with each override written into the
        field it replaces."""
        patched = dict(data)
        for name, path, value in self._given():
            section = _section(patched, path[:-1])
            if section is None:  # the spec wrote that section as something else: validation names it
                continue
            section[path[-1]] = list(value) if isinstance(value, list) else value
            if name == "ray":  # an address to solve on is a Ray run
                section["executor"] = "ray"
        return patched

    def blamed(self, error: ValidationError, data: Mapping[str, Any] | None = None,
               validate: Callable[[Any], Any] | None = None) -> str | None:
        """The first problem of ``error`` as one line naming the option at fault: the option that
        replaced the field it lies in (``--limit 0: must be >= 1``), or, for a problem of a whole
        section or across fields (``dataset: 'hf://': expected hf://OWNER/NAME``, concurrency ×
        parallel agents), the option without whose value the spec ``data`` (as written, before
        the overrides) passes ``validate`` on that point. None when the spec's own value is at fault."""
        problems = error.errors()
        first = problems[0]
        where = tuple(str(part) for part in first["loc"])
        given = self._given()
        culprit = next((item for item in given if where[: len(item[1])] == item[1]), None)
        if culprit is None and data is not None and validate is not None:
            inside = [item for item in given if item[1][: len(where)] == where]  # options in that section
            culprit = next((item for item in inside if not _still_fails(
                first, RunOverrides(**{n: v for n, _, v in given if n != item[0]}).apply(data), validate)),
                None)
        if culprit is None:
            return None
        name, _, value = culprit
        more = len(problems) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        return f"{option_text(name, value)}: {describe(first, show_input=False)}{suffix}"


    def blamed_field(self, error: FieldError, source: str) -> UserError:
        """A spec field refused at start-up (``error``), blamed on the option that set its value
        (``--ray bogus:1: …``), else on the spec ``source``."""
        for name, path, value in self._given():
            if ".".join(path) == error.field:
                return UserError(f"{option_text(name, value)}: {error.problem}")
        return UserError(f"{source}: {error}")


def option_text(name: str, value: Any) -> str:
    """An option as it was given: ``--seeds 0,1``, ``--api-key-env ''``."""
    shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return f"--{name.replace('_', '-')} {shown if shown.strip() else repr(shown)}"


def _still_fails(problem: Any, data: Mapping[str, Any], validate: Callable[[Any], Any]) -> bool:
    """Whether ``data`` has ``problem`` too (the same place, kind and message)."""
    try:
        validate(data)
    except ValidationError as error:
        return any((p["loc"], p["type"], p["msg"]) == (problem["loc"], problem["type"], problem["msg"])
                   for p in error.errors())
    return False


def _section(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """The mapping at ``keys`` in ``data``, copied into it (created if absent) so that writing to
    it leaves the caller's spec alone; None where the spec holds something else than a mapping."""
    for key in keys:
        inner = data.get(key) or {}
        if not isinstance(inner, Mapping):
            return None
        data[key] = dict(inner)
        data = data[key]
    return data

