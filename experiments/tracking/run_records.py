"""Which MLflow runs hold an experiment's results, so the same command after a kill — at any
point — reopens them instead of making new ones.

A parent run is found by its invocation tag (configuration × problems × seeds), a child by its
``<label>/seed=<n>`` tag, both set when the run is created: no local bookkeeping file can fall
out of step with the store, and a kill between two steps can never orphan a run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from critiquelab.eval.datasets import dataset_provenance
from critiquelab.eval.execution import isolation_level
from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.serving.provision import ModelIdentity
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.experiments.tracking.provenance import code_fingerprint, git_commit, package_versions
from critiquelab.experiments.tracking.store import (
    CHILD_TAG,
    INVOCATION_TAG,
    PARENT_TAG,
    Tracker,
    child_key,
    flatten,
    most_complete,
)


def results_digest(results: list[ProblemResult]) -> str:
    """What a child run logged, in one value: a resumed run whose results are unchanged leaves
    that child exactly as it is."""
    digest = hashlib.sha256()
    for result in results:
        # Without the schema version: a child logged before results carried one is still left as
        # it was when resumed (its results read back unchanged).
        digest.update(result.model_dump_json(exclude={"schema_version"}).encode() + b"\n")
    return digest.hexdigest()


def child_run(
    tracker: Tracker, parent_id: str, siblings: list[Any], label: str, seed: int
) -> tuple[str, Any]:
    """The parent's run of ``label`` × ``seed``, reused whatever its state (running, killed,
    finished), else a new one; the tag is set at creation, so a kill can never orphan it."""
    key = f"{label}/seed={seed}"
    mine = [r for r in siblings if child_key(r) == key]
    if mine:
        run = most_complete(mine)
        return run.info.run_id, run
    return tracker.start_run(f"{label}-seed{seed}", parent_id=parent_id, tags={CHILD_TAG: key}), None


def invocation_digest(key: str, spec: ExperimentSpec, problems: list[Problem]) -> str:
    """What one parent run holds: the configuration (checkpoint key), the problems and the seeds.
    The same command after a kill has the same digest and resumes that parent; another subset
    or seed list is another invocation with a parent of its own (reusing the checkpoints)."""
    material = json.dumps({"key": key, "tasks": [p.task_id for p in problems], "seeds": spec.seeds})
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def open_parent_run(
    tracker: Tracker, spec: ExperimentSpec, identity: ModelIdentity, key: str,
    problems: list[Problem], *, resume: bool, served_by: dict[str, str],
) -> str:
    """Reopen the parent run that a killed invocation of the same command left unfinished, else
    start a new one. Found by tag in MLflow, so a kill between two steps can never lose it."""
    invocation = invocation_digest(key, spec, problems)
    unfinished = [
        r for r in tracker.runs_tagged({INVOCATION_TAG: invocation})
        if r.info.status != "FINISHED" and PARENT_TAG not in r.data.tags
    ]
    if resume and unfinished:
        parent_id = str(unfinished[0].info.run_id)
        tracker.reopen(parent_id)
    else:
        parent_id = tracker.start_run(
            spec.name, tags={"critiquelab.checkpoint_key": key, INVOCATION_TAG: invocation}
        )
    # Logged on a reopened parent too (params already there are kept): a kill may have come
    # between the parent's creation and these lines.
    local = "127.0.0.1 (local server)" if identity.is_local else "default"
    tracker.log_params(parent_id, {
        **flatten(spec.model_dump(mode="json"), "config."),
        "model.resolved": identity.resolved, "model.file_sha256": identity.file_sha256 or "n/a",
        "model.api_base": identity.api_base or local,
        "isolation": isolation_level(), "problems": len(problems), "dataset.split": spec.dataset.split,
        **dataset_provenance(spec.dataset.location), **served_by,
        **{f"version.{k}": v for k, v in package_versions().items()},
    })
    tracker.set_tags(parent_id, {
        "git_commit": git_commit(), "critiquelab.code_fingerprint": code_fingerprint(),
    })
    config = yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
    tracker.log_text(parent_id, config, "config.yaml")
    from critiquelab.optimizers.export import prompts_by_role

    def loaded(source: str) -> str:  # keyed by role: `critiquelab export` of the run reads it back
        return json.dumps(prompts_by_role(source, registry_uri=tracker.uri), indent=2, sort_keys=True)

    if spec.prompts:
        tracker.log_text(parent_id, loaded(spec.prompts), "prompts/program.json")
    for pipeline_spec in spec.pipelines:
        if pipeline_spec.prompts:
            tracker.log_text(parent_id, loaded(pipeline_spec.prompts),
                             f"prompts/{pipeline_spec.display_name}/program.json")
    return parent_id
