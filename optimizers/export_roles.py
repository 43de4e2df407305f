"""Exported prompts keyed by role, the name a pipeline's registration declares once.

An export's ``program.json`` holds one DSPy predictor state per *role* (``coder``, ``critic``),
not per predictor attribute: the role is the name the pool, per-role models and the optimisers
use, and it is what lets the coder of a critic loop's export load into debate, whose ``coder``
is served by a predictor called ``proposer``. A role whose predictors were given different
states (no built-in pipeline has one) keeps them under the predictors' own names.

Exports written before roles were declared are keyed by predictor name, and a Prompt Registry
version by ``critiquelab.role`` = predictor name; :func:`migrate_state` is the one place that
reads either form, using the exporting pipeline's declaration where the manifest names it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dspy

from critiquelab.core.errors import UserError
from critiquelab.pipelines.registry import program_roles, role_map

MANIFEST_FILE = "manifest.json"


def role_keyed(program: dspy.Module, state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` (``program.save``'s, keyed by predictor name) keyed by the role each predictor
    serves; ``metadata`` kept as it is."""
    roles = program_roles(program)
    keyed: dict[str, Any] = {}
    by_role: dict[str, list[str]] = {}
    for name, _ in program.named_predictors():
        by_role.setdefault(roles.role_of(name), []).append(name)
    for role, names in by_role.items():
        states = [state[name] for name in names]
        if all(s == states[0] for s in states):
            keyed[role] = states[0]
        else:  # the same role, prompted differently per predictor: each keeps its own
            keyed.update({name: state[name] for name in names})
    if "metadata" in state:
        keyed["metadata"] = state["metadata"]
    return keyed


def migrate_state(state: Mapping[str, Any], pipeline: str | None) -> dict[str, Any]:
    """An exported state keyed by role: the export of today unchanged, one keyed by predictor
    name (written before roles were declared, or a registry version tagged so) mapped through
    the declaration of ``pipeline``, the pipeline that exported it (None: not known, the keys
    stay). ``metadata`` is dropped: it is no role."""
    declared = None
    if pipeline:
        try:
            declared = role_map(pipeline)
        except UserError:
            declared = None  # a pipeline no longer installed: its keys are taken as they are
    migrated: dict[str, Any] = {}
    for key, value in state.items():
        if key == "metadata":
            continue
        role = key
        if declared is not None and key not in declared.roles:
            role = declared.find_role(key) or key
        migrated.setdefault(role, value)
    return migrated


def exporting_pipeline(state_file: Path) -> str | None:
    """The pipeline the export holding ``state_file`` came from, if its manifest says."""
    manifest = state_file.with_name(MANIFEST_FILE)
    try:
        data = json.loads(manifest.read_text()) if manifest.is_file() else None
    except (UnicodeDecodeError, ValueError):
        return None
    pipeline = data.get("pipeline") if isinstance(data, dict) else None
    return pipeline if isinstance(pipeline, str) else None


def _fields_differ(predictor: Any, saved: Any) -> str | None:
    """Why ``saved`` (a predictor's dumped state) cannot be loaded into ``predictor``, or None.
    DSPy pairs saved fields with the signature's by position, so a prompt exported from another
    configuration (debate without execution_feedback into a grounded debate: one field more)
    would put each description on the wrong field, silently."""
    fields = (saved.get("signature") or {}).get("fields") if isinstance(saved, Mapping) else None
    if not isinstance(fields, list):
        return None  # no signature in the state: nothing is paired
    have = [field.json_schema_extra["prefix"] for field in predictor.signature.fields.values()]
    got = [field.get("prefix") if isinstance(field, Mapping) else None for field in fields]
    if got == have:
        return None
    return f"its fields ({', '.join(map(str, got))}) are not the predictor's ({', '.join(have)})"


def load_role_state(program: dspy.Module, state: Mapping[str, Any], source: str) -> list[str]:
    """Load ``state`` (keyed by role, see :func:`migrate_state`) into ``program`` in place: each
    predictor takes its role's state, or, failing that, the state under its own name (an old
    export of the same pipeline read without its manifest). Predictors with neither keep
    theirs; nothing matched at all is one line naming the pipeline and its roles. Returns the
    predictor names loaded."""
    roles = program_roles(program)
    loaded = []
    for name, predictor in program.named_predictors():
        role = roles.role_of(name)
        key = name if name in state and name != role and role not in state else role
        if key in state:
            differs = _fields_differ(predictor, state[key])
            if differs:
                raise UserError(f"{source}: the prompt of role '{key}' cannot be loaded into pipeline "
                                f"'{roles.pipeline}' ({name}): {differs}; it was exported from another "
                                "configuration of the role")
            predictor.load_state(state[key])
            loaded.append(name)
    if not loaded:
        given = ", ".join(sorted(state))
        raise UserError(f"{source}: its prompts ({given}) match no role of pipeline '{roles.pipeline}' "
                        f"(roles: {', '.join(roles.names)})")
    return loaded


__all__ = ["exporting_pipeline", "load_role_state", "migrate_state", "role_keyed"]
