"""Export the prompts a plain (non-optimisation) run's roles were sent.

An optimisation run logs the program it produced (its ``program`` artifact) and ``critiquelab
export`` writes that. A plain run logs no program, but everything its prompts were made of:
the spec as run (the parent's ``config.yaml``: pipeline, params, memory), the exported prompts it
loaded, keyed by role (``prompts/…/program.json``), and every role call's rendered messages as
the adapter sent them (the child's ``messages.jsonl``, each trace's ``exchanges``). The program
is rebuilt from the first two, exactly as the runner built it before memory (if on) added its
field, and exported as an optimised one is, so ``run --prompts`` takes it back. The third is
the evidence: each role's first recorded request is written beside it (``sent.json``), and a
role whose recorded system message is not the rebuilt program's is named in a notice, never
passed over; so is a run with memory, whose calls also carried what memory recalled.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from critiquelab.core.errors import UserError
from critiquelab.experiments.tracking.store import PARENT_TAG
from critiquelab.optimizers.export import render_messages
from critiquelab.pipelines.controls import CONTROL_TAG
from critiquelab.pipelines.registry import program_roles

SENT_FILE = "sent.json"


@dataclass
class RunProgram:
    """One child run's program, rebuilt, and what its roles were recorded sending."""

    label: str
    pipeline: str
    params: dict[str, Any]
    program: Any
    run_id: str
    sent: dict[str, dict[str, Any]] = field(default_factory=dict)  # role -> {task_id, messages}
    notices: list[str] = field(default_factory=list)


def artifact_text(client: Any, run_id: str, path: str) -> str | None:
    """An artifact's text, or None if the run has no such artifact."""
    folder = path.rpartition("/")[0]
    if not any(a.path == path for a in client.list_artifacts(run_id, folder or None)):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return Path(client.download_artifacts(run_id, path, tmp)).read_text()


def plain_children(client: Any, run: Any) -> tuple[str, list[Any]]:
    """``(parent run id, child runs)`` a plain run id stands for: a child (pipeline × seed) is
    itself; a parent stands for its children, one seed per label (the prompts do not depend on
    the seed), positive controls left out (their prompts carry hidden-test text)."""
    if "pipeline" in run.data.params and PARENT_TAG in run.data.tags:
        return run.data.tags[PARENT_TAG], [run]
    children = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`{PARENT_TAG}` = '{run.info.run_id}'",
        order_by=["attributes.start_time ASC"],
    )
    chosen: dict[str, Any] = {}
    for child in children:
        label = child.data.params.get("pipeline.label")
        if label and CONTROL_TAG not in child.data.tags:
            chosen.setdefault(label, child)
    return run.info.run_id, list(chosen.values())


def rebuild(client: Any, parent_id: str, child: Any) -> RunProgram:
    """The program ``child`` ran, as the runner built it: the spec's pipeline and params, the
    exported prompts the run loaded, memory's field where memory was on."""
    from critiquelab.experiments.child_steps import make_pipeline
    from critiquelab.experiments.memory_run import memory_of
    from critiquelab.experiments.spec.experiment import parse_spec
    from critiquelab.optimizers.export_roles import load_role_state
    from critiquelab.pipelines.budget import TokenBudgetParams

    config = artifact_text(client, parent_id, "config.yaml")
    if config is None:
        raise UserError(f"run {child.info.run_id}: its parent {parent_id} has no config.yaml; "
                        "cannot tell which program it ran")
    spec = parse_spec(yaml.safe_load(config), f"run {parent_id} config.yaml")
    label = child.data.params["pipeline.label"]
    pipeline_spec = next((p for p in spec.pipelines if p.display_name == label), None)
    if pipeline_spec is None:
        raise UserError(f"run {child.info.run_id}: pipeline '{label}' is not in its parent's config.yaml")
    params = pipeline_spec.params
    if isinstance(params, TokenBudgetParams) and params.token_budget_from is not None:
        params = params.with_measured_budget(0.0)  # the budget changes no prompt
    program = make_pipeline(pipeline_spec.name, params)
    for source in (f"prompts/{label}/program.json", "prompts/program.json"):
        loaded = artifact_text(client, parent_id, source)
        if loaded is not None:
            load_role_state(program, json.loads(loaded), f"run {parent_id} {source}")
            break
    rebuilt = RunProgram(label, pipeline_spec.name, pipeline_spec.params.model_dump(mode="json"), program,
                         child.info.run_id)
    if memory_of(pipeline_spec) is not None:
        # The runner loads prompts before memory adds its field, and recalls per call: the export
        # holds the prompts without memory, as `run --prompts` with the same memory config loads them.
        rebuilt.notices.append(f"{label}: memory was on: its calls also carried what memory recalled "
                               f"(see {SENT_FILE}); the export holds the prompts without it")
        _read_sent(client, rebuilt, check=False)
    else:
        _read_sent(client, rebuilt)
    return rebuilt


def _read_sent(client: Any, rebuilt: RunProgram, *, check: bool = True) -> None:
    """Each role's first recorded request from the run's message log and, with ``check``, a
    notice for a role whose recorded system message differs from the rebuilt program's."""
    log = artifact_text(client, rebuilt.run_id, "messages.jsonl")
    if log is None:
        rebuilt.notices.append(f"{rebuilt.label}: run {rebuilt.run_id} has no messages.jsonl: the prompts "
                               "are rebuilt from its spec, with no recorded request to check them against")
        return
    roles = program_roles(rebuilt.program)
    for line in log.splitlines():
        trace = json.loads(line).get("metadata", {}).get("trace") or {}
        role = roles.role_of_call(str(trace.get("role", "")))
        exchanges = trace.get("exchanges") or []
        if role and role not in rebuilt.sent and exchanges and exchanges[0].get("request"):
            rebuilt.sent[role] = {"task_id": json.loads(line).get("task_id"),
                                  "messages": exchanges[0]["request"]}
    for role, recorded in rebuilt.sent.items() if check else ():
        predictors = roles.predictors(rebuilt.program, role)
        system = render_messages(predictors[0][1])[0]["content"] if predictors else None
        messages = recorded["messages"]
        if system is not None and messages and messages[0].get("content") != system:
            rebuilt.notices.append(f"{rebuilt.label}: role {role}'s recorded system message differs from "
                                   f"the rebuilt program's (see {SENT_FILE})")


def write_sent(rebuilt: RunProgram, out: Path) -> Path:
    """``sent.json``: per role, the task and the messages of its first recorded request."""
    path = out / SENT_FILE
    path.write_text(json.dumps(rebuilt.sent, indent=2) + "\n")
    return path


def plain_run_programs(client: Any, run_id: str) -> list[RunProgram]:
    """The rebuilt programs of a plain run (a child: one; a parent: one per pipeline label)."""
    parent_id, children = plain_children(client, client.get_run(run_id))
    if not children:
        raise UserError(f"run {run_id} has no 'program' artifact and is no experiment run with "
                        "finished pipelines (nothing to export)")
    return [rebuild(client, parent_id, child) for child in children]


def export_plain_run(
    home: Path, run_id: str, *, formats: Sequence[str], out: Path | None, prefix: str | None,
) -> dict[str, Any]:
    """``critiquelab export RUN_ID`` of a plain run: each pipeline's rebuilt program in the
    formats asked for (``out`` itself for one pipeline, ``out/<label>`` for several), its
    recorded requests in ``sent.json``; ``mlflow`` registers one prompt per role. Returns the
    files written, the registered prompts and the notices."""
    from mlflow.tracking import MlflowClient

    from critiquelab.experiments.tracking.store import ServiceClient, tracking_uri
    from critiquelab.optimizers.export import export_program, register_prompts

    uri = tracking_uri(home)
    client = ServiceClient(MlflowClient(tracking_uri=uri), uri)
    rebuilt = plain_run_programs(client, run_id)
    base = out or home / "exports" / run_id
    files = [f for f in formats if f != "mlflow"] or ["json"]
    result: dict[str, Any] = {"files": [], "notices": [], "prompts": {}}
    for item in rebuilt:
        folder = base if len(rebuilt) == 1 else base / item.label
        written = export_program(item.program, folder, pipeline=item.pipeline, params=item.params,
                                 formats=files, source=item.run_id)
        result["files"] += [str(p) for p in [*written, write_sent(item, folder)]]
        result["notices"] += item.notices
        if "mlflow" in formats:
            result["prompts"].update(register_prompts(
                item.program, uri, prefix=prefix or f"critiquelab.{item.label}", run_id=item.run_id))
    if "mlflow" not in formats:
        del result["prompts"]
    return result


__all__ = ["RunProgram", "export_plain_run", "plain_children", "plain_run_programs", "rebuild", "write_sent"]
