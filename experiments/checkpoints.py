"""Per-problem checkpoints, so an interrupted experiment resumes without redoing or
double-counting work.

A configuration's checkpoints live under its :func:`checkpoint_key`: what determines a problem's
result. One append-only JSONL file per pipeline × seed. Each finished problem is one line, flushed
and fsynced before the next problem is reported done. A line torn by a kill is dropped on
the next open; a task recorded twice keeps its first record. A manifest beside them names each
pipeline's cost key, so ``critiquelab run --estimate`` can use these problems' measured cost for
any later experiment that runs the same pipeline the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import dataset_fingerprint
from critiquelab.eval.results import ProblemResult, ResolvedParams
from critiquelab.experiments.memory_run import memory_of
from critiquelab.experiments.paths import path_segment
from critiquelab.experiments.serving.provision import ModelIdentity
from critiquelab.experiments.spec.execution import ExecutionSpec
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.experiments.tracking.provenance import PROJECT_ROOT, code_fingerprint
from critiquelab.pipelines.params import SCHEDULING_ONLY, marked_fields

MANIFEST = "manifest.json"
# The model settings that change what the model answers (hence tokens and time); transport
# settings (retries, timeouts, keys) do not.
_ANSWER_SETTINGS = {"temperature", "max_tokens", "n_ctx", "send_seed"}


# ModelSpec fields that decide how and where replies are produced, never which (README, Models).
_SERVING_SETTINGS = {"num_retries", "timeout_s", "server", "slots", "speculative"}


def cost_keys(
    spec: ExperimentSpec, model_identity: str, dataset_fingerprint: str, prompts: Mapping[str, str]
) -> dict[str, str]:
    """Per pipeline label, what its cost per problem depends on: the model (``model_identity``)
    and the settings that change its answers, the dataset, the pipeline with its params and loaded
    prompts (``prompts``: fingerprints by label). Not the experiment's name, its other pipelines,
    the seeds or the code version, so an estimate draws on every earlier problem that shares it."""
    common = {
        "model_identity": model_identity,
        "model": spec.model.model_dump(include=_ANSWER_SETTINGS),
        "dataset": {
            "source": dataset_fingerprint, "fields": spec.dataset.fields,
            "format": spec.dataset.format, "challenge_tests": spec.dataset.challenge_tests,
        },
    }
    keys = {}
    for pipeline in spec.pipelines:
        # As in the checkpoint key: parallel_agents changes when calls are made, not what they
        # ask, and one store holds problems run with any value of it.
        material = {**common, "pipeline": pipeline.name, "params": pipeline.params.key_values(),
                    "prompts": prompts.get(pipeline.display_name)}
        if pipeline.roles:  # only then, so keys of pipelines without role settings stay as they were
            material["roles"] = {name: role.model_dump() for name, role in pipeline.roles.items()}
        if pipeline.memory is not None and pipeline.memory.enabled:  # reflection costs calls
            material["memory"] = pipeline.memory.key_values()
        blob = json.dumps(material, sort_keys=True, default=str)
        keys[pipeline.display_name] = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return keys


@dataclass(frozen=True)
class InputFingerprints:
    """What a run's inputs hash to, computed once per run: the checkpoint key and the cost keys
    both use them, and a prompts fingerprint may read a Prompt Registry."""

    dataset: str
    prompts: dict[str, str]  # by pipeline label, for the pipelines that load exported prompts


def input_fingerprints(spec: ExperimentSpec, registry_uri: str) -> InputFingerprints:
    """Loaded prompts change every result, so their content is part of the keys (the
    dataset's too); reading them checks each source is prompts at all."""
    from critiquelab.optimizers.export import prompts_fingerprint

    sources = {p.display_name: spec.prompts_of(p) for p in spec.pipelines}
    prompts = {
        label: prompts_fingerprint(source, registry_uri=registry_uri)
        for label, source in sources.items() if source
    }
    return InputFingerprints(dataset_fingerprint(spec.dataset.location), prompts)


def outside_code(spec: ExperimentSpec) -> dict[str, str]:
    """SHA-256 of the code of each pipeline defined outside the project (a plugin, a file a spec
    names): :func:`code_fingerprint` covers only the project's packages, so an edited plugin would
    otherwise reuse the results of its earlier code. A module inside a package counts with every
    ``.py`` file of that package's folder."""
    from critiquelab.pipelines.registry import pipeline_source

    found = {}
    for pipeline in spec.pipelines:
        source = pipeline_source(pipeline.name)
        if source is None or PROJECT_ROOT in source.parents:
            continue
        files = sorted(source.parent.rglob("*.py")) if (source.parent / "__init__.py").is_file() else [source]
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.name.encode() + path.read_bytes())
        found[pipeline.name] = digest.hexdigest()
    return found


def checkpoint_key(spec: ExperimentSpec, identity: ModelIdentity, fingerprints: InputFingerprints) -> str:
    """What determines a problem's result; the subset (split, limit, task ids) and concurrency do
    not, so a larger run reuses a smaller run's finished problems."""
    material = {
        "name": spec.name,
        "dataset": {  # the format and challenge tests change the hidden tests, hence every result
            "source": fingerprints.dataset, "fields": spec.dataset.fields,
            "format": spec.dataset.format, "challenge_tests": spec.dataset.challenge_tests,
        },
        # Transport and serving settings change no answer's cache key, so no checkpoint either.
        "model": spec.model.model_dump(exclude=_SERVING_SETTINGS),
        "model_identity": identity.cache_identity,
        # parallel_agents changes when role calls are made, never what they ask (tested): runs
        # that differ only in it share their finished problems (PipelineParams.key_values).
        # Memory left off leaves the key as it was before memory existed.
        "pipelines": [
            {**p.model_dump(exclude=set() if memory_of(p) else {"memory"}), "params": p.params.key_values()}
            for p in spec.pipelines
        ],
        "execution": spec.execution.model_dump(exclude=set(marked_fields(ExecutionSpec, SCHEDULING_ONLY))),
        "prompts": fingerprints.prompts or None,
        "code": code_fingerprint(),
        **({"order_seed": spec.order_seed} if spec.order_seed is not None else {}),
        # Only when there is such code: every other configuration keeps the key it had.
        **({"outside_code": outside} if (outside := outside_code(spec)) else {}),
    }
    blob = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def checkpoint_store(
    spec: ExperimentSpec, identity: ModelIdentity, key: str, home: Path, fingerprints: InputFingerprints
) -> CheckpointStore:
    """Where the configuration ``key`` checkpoints its finished problems, with each pipeline's
    cost key in the store's manifest."""
    keys = cost_keys(spec, identity.cache_identity, fingerprints.dataset, fingerprints.prompts)
    return CheckpointStore(home / "checkpoints" / f"{path_segment(spec.name)}-{key}", cost_keys=keys)


class CheckpointStore:
    """Checkpoints of one experiment configuration, in ``directory``."""

    def __init__(self, directory: Path, cost_keys: Mapping[str, str] | None = None) -> None:
        """``cost_keys``: each pipeline label's cost key, written to the manifest with the first
        checkpoint (a store only read, as by an estimate, writes nothing)."""
        self.directory = directory
        self.pipeline_cost_keys = dict(cost_keys or {})
        self._lock = threading.Lock()

    def _path(self, pipeline: str, seed: int) -> Path:
        return self.directory / f"{path_segment(pipeline)}__seed{seed}.jsonl"

    def load(
        self, pipeline: str, seed: int, resolved: ResolvedParams | None = None
    ) -> dict[str, ProblemResult]:
        """The finished problems of ``pipeline`` × ``seed`` by task id. ``resolved``: only those
        run under these resolved parameters (a token budget measured on another subset of
        problems is another budget); None: all."""
        path = self._path(pipeline, seed)
        done: dict[str, ProblemResult] = {}
        if not path.exists():
            return done
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:  # a directory, unreadable, not text
            raise UserError(
                f"cannot read the checkpoint file {path} ({type(error).__name__}); it was not "
                "written by critiquelab: move it away (its problems will be run again)"
            ) from error
        for line in text.splitlines():
            try:
                result = ProblemResult.model_validate_json(line)
            except ValueError:
                continue  # a torn final line from a killed run
            if resolved is None or result.resolved_params == resolved:
                done.setdefault(result.task_id, result)
        return done

    def load_all(self, pipeline: str) -> list[ProblemResult]:
        """Every problem checkpointed for ``pipeline``, all seeds."""
        found = self.directory.glob(f"{path_segment(pipeline)}__seed*.jsonl")
        # A file whose seed is not a number was not written here (_path writes ints): skipped.
        seeds = sorted(
            int(seed) for path in found
            if re.fullmatch(r"-?[0-9]+", seed := path.stem.rsplit("__seed", 1)[1])
        )
        return [r for seed in seeds for r in self.load(pipeline, seed).values() if r.pipeline == pipeline]

    def recorded_cost_keys(self) -> dict[str, str]:
        """The manifest's cost key per pipeline label; empty for stores written before manifests
        existed, or a manifest that cannot be read."""
        try:
            recorded = json.loads((self.directory / MANIFEST).read_text())["cost_keys"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        return {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else {}

    def append(self, result: ProblemResult) -> None:
        path = self._path(result.pipeline, result.seed)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._write_manifest()
            self._drop_torn_tail(path)
            with path.open("a") as handle:
                handle.write(result.model_dump_json() + "\n")
                handle.flush()
                os.fsync(handle.fileno())

    def _write_manifest(self) -> None:
        manifest = self.directory / MANIFEST
        if not self.pipeline_cost_keys or manifest.exists():
            return
        partial = manifest.with_suffix(f".partial-{os.getpid()}")
        partial.write_text(json.dumps({"cost_keys": self.pipeline_cost_keys}, indent=2, sort_keys=True))
        os.replace(partial, manifest)  # atomic: a kill never leaves half a manifest

    @staticmethod
    def _drop_torn_tail(path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        with path.open("rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            data = handle.read()
            handle.truncate(data.rfind(b"\n") + 1)
