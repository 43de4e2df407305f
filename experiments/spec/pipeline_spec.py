"""One pipeline entry of an experiment spec (``pipelines: [{name: debate, params: {...}}]``):
which registered pipeline, under which label, with its typed params, prompts, per-role models and
memory. Its ``params`` become the pipeline's own params model here, the one validation they get.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from critiquelab.core.config import StrictModel
from critiquelab.core.errors import UserError
from critiquelab.core.plugins import anchored
from critiquelab.experiments.controls import memory_refusal
from critiquelab.experiments.serving.model_files import resolve_bundled
from critiquelab.experiments.spec.strict import PrintableName
from critiquelab.experiments.urls import http_url_problem
from critiquelab.pipelines.params import PipelineParams
from critiquelab.pipelines.registry import params_model, pipeline_roles, registered_name, validate_params
from critiquelab.runtime.memory.config import MemoryConfig


def _endpoint_url(url: str | None) -> str | None:
    """An endpoint is an http(s) URL with a host: anything else (``ftp://x``, ``localhost:8080``
    without its scheme) would only fail at the first request, or be read as something else by
    LiteLLM. ``user:password@`` in it would be printed in every message that names the endpoint
    (and LiteLLM reads it as part of the host name)."""
    if url is None:
        return url
    problem = http_url_problem(url)
    if problem:
        raise PydanticCustomError("api_base_url", "{problem}", {"problem": problem})
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise PydanticCustomError("api_base_credentials", "must not hold credentials (user:password@); "
                                  "give the key with api_key_env")
    return url


EndpointUrl = Annotated[str | None, AfterValidator(_endpoint_url)]


def bundled_endpoint(model: str) -> str:
    """Why an endpoint URL is refused beside a bundled model: the harness serves that model on a
    port of its own, so the URL would be ignored and the run would not be the endpoint's."""
    return (f"api_base: '{model}' is a bundled model the harness serves itself, so the URL would be "
            "ignored; to use an endpoint give its LiteLLM model string too (--model openai/NAME "
            "--api-base URL)")


class RoleSpec(StrictModel):
    """One role's own model, sampling and reply limit (``roles: {fixer: {temperature: 0.8}}``)."""

    model: str | None = Field(
        default=None, min_length=1,
        description="'local', 'local-1.5b' or a LiteLLM model string (served with the experiment's "
        "model settings); default: the experiment's model.",
    )
    api_base: EndpointUrl = Field(default=None, min_length=1,
                                  description="Endpoint URL of a LiteLLM `model`.")
    temperature: float | None = Field(
        default=None, ge=0.0, le=2.0,
        description="This role's temperature; default: the model's. Calls a pipeline samples itself "
        "(vote samples, debaters, tree search children) keep their own.",
    )
    max_tokens: int | None = Field(
        default=None, ge=1,
        description="Most tokens one reply of this role may take; default: the model's max_tokens "
        "(with a bundled model it must leave room for the prompt in model.n_ctx).",
    )

    @model_serializer(mode="wrap")
    def _without_unset_limit(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Left out when not given, so the cost keys of specs written before it stay as they were.
        dumped = handler(self)
        if isinstance(dumped, dict) and dumped.get("max_tokens") is None:
            dumped.pop("max_tokens", None)
        return dumped

    @field_validator("model")
    @classmethod
    def _known_model(cls, model: str | None) -> str | None:
        if model is not None and resolve_bundled(model) is None and "/" not in model:
            message = (f"'{model}' is not a model: use 'local', 'local-1.5b' or a LiteLLM string "
                       "such as 'openai/gpt-4o-mini' (provider/model)")
            raise PydanticCustomError("role_model", "{message}", {"message": message})
        return model

    @model_validator(mode="after")
    def _api_base_needs_model(self) -> RoleSpec:
        if self.api_base is not None and self.model is None:
            message = "api_base needs a model (the LiteLLM model string it serves)"
            raise PydanticCustomError("role_api_base", "{message}", {"message": message})
        if self.api_base is not None and self.model is not None and resolve_bundled(self.model):
            raise PydanticCustomError("role_api_base", "{message}", {"message": bundled_endpoint(self.model)})
        return self


class PipelineSpec(StrictModel):
    """One pipeline of an experiment: a registered pipeline, its params model and its settings."""

    name: str = Field(description="A registered pipeline (see `critiquelab pipelines`: critiquelab's and "
                      "installed plugins'), or one from your own code: `package.module:Name` (an "
                      "importable module) or `path/to/file.py:Name` (relative to the spec's "
                      "directory), Name being its registered name or its class.")
    label: PrintableName | None = Field(
        default=None,
        description="Name in results; defaults to the pipeline's registered name. Must be unique.",
    )
    # Always given: the validator below puts the pipeline's own model here (its defaults if the
    # spec has no params). SerializeAsAny: dumped as that model, every field, not as the empty base.
    params: SerializeAsAny[PipelineParams] = Field(
        description="The pipeline's parameters (`critiquelab pipelines` lists them): a mapping in a "
        "spec, read into the pipeline's typed model when the spec is read (checked once, completed "
        "with the defaults), so a run records every value and `{}` and the explicit defaults share "
        "checkpoints. In Python, that model itself may be given (e.g. `DebateParams(debaters=2)`).",
    )
    prompts: str | None = Field(
        default=None, min_length=1,
        description="Exported prompts for this pipeline only (overrides the experiment's `prompts`), "
        "so one experiment can pair a pipeline with and without optimised prompts.",
    )
    roles: dict[str, RoleSpec] = Field(
        default_factory=dict,
        description="Role name (as in the role.NAME metrics) -> its own model, temperature and/or "
        "max_tokens, e.g. {fixer: {temperature: 0.8}, critic: {model: local-1.5b}, "
        "judge: {max_tokens: 2048}}.",
    )
    memory: MemoryConfig | None = Field(
        default=None,
        description="Episodic memory, skills and sharing for this pipeline (`enabled: true` turns "
        "it on); left out or disabled, prompts are exactly those of a run without memory.",
    )

    @model_validator(mode="before")
    @classmethod
    def _typed_params(cls, data: Any) -> Any:
        """``params`` become the model pipeline ``name`` declares: the one validation they get."""
        if not isinstance(data, Mapping):
            return data
        name, params = data.get("name"), data.get("params", {})
        if not isinstance(name, str):  # the name's error is the one to report: no model to check against
            return {**data, "params": PipelineParams()} if isinstance(params, Mapping) else data
        try:
            if isinstance(params, Mapping):
                return {**data, "params": validate_params(name, params)}
            model = params_model(name)
        except UserError as exc:  # one line naming the pipeline, the field and what is allowed
            raise PydanticCustomError("pipeline_params", "{message}", {"message": str(exc)}) from exc
        if isinstance(params, PipelineParams) and type(params) is not model:
            message = f"pipeline '{name}': params: expected {model.__name__}, got {type(params).__name__}"
            raise PydanticCustomError("pipeline_params", "{message}", {"message": message})
        return data

    @field_validator("params", mode="before")
    @classmethod
    def _params_mapping(cls, params: Any) -> Any:
        """What is left unconverted here is no mapping (a spec's ``params: 3``): say what it should be."""
        if not isinstance(params, PipelineParams):
            raise PydanticCustomError("dict_type", "Input should be a valid dictionary")
        return params

    @model_validator(mode="after")
    def _known_roles(self) -> PipelineSpec:
        known = pipeline_roles(self.name)
        for role in self.roles:
            if role not in known:
                allowed = ", ".join(known) or "none (this pipeline declares no configurable roles)"
                message = f"pipeline '{self.name}': roles.{role}: unknown role; roles: {allowed}"
                raise PydanticCustomError("pipeline_roles", "{message}", {"message": message})
        return self

    @model_validator(mode="after")
    def _control_without_memory(self) -> PipelineSpec:
        refusal = memory_refusal(self.name, self.params, self.memory)  # see critiquelab.experiments.controls
        if refusal:
            raise PydanticCustomError("pipeline_control", "{message}", {"message": refusal})
        return self

    @property
    def display_name(self) -> str:
        return self.label or registered_name(self.name)


def anchored_entry(entry: Any, base: Path) -> Any:
    """A spec's pipeline entry named by a relative file (``my_pipes.py:Name``) named by its
    absolute path from ``base`` (the spec's directory): the name a run records then loads from
    any directory, as ``compare`` and ``rescore`` read it later. Anything else is unchanged."""
    if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
        return {**entry, "name": anchored(entry["name"], base)}
    return entry


def anchored_pipeline_files(spec: dict[str, Any], base: Path) -> dict[str, Any]:
    """``spec`` with each of its ``pipelines`` :func:`anchored_entry`."""
    pipelines = spec.get("pipelines")
    if not isinstance(pipelines, list):
        return spec
    return {**spec, "pipelines": [anchored_entry(entry, base) for entry in pipelines]}
