"""Export optimised prompts in forms people read and tools reuse, and import them back.

An export directory holds:

* ``program.json`` — the DSPy state (``program.save``'s), keyed by role (the names the
  pipeline's registration declares, :mod:`critiquelab.optimizers.export_roles`): per role its instruction,
  field descriptions and demos. This is what ``critiquelab run --prompts`` loads back, into any
  pipeline with those roles; a prompt registered in MLflow's Prompt Registry carries its role's
  state too, so ``--prompts prompts:/NAME/VERSION`` loads it back from there. Exports keyed by
  predictor name (written before roles were declared) still load.
* ``manifest.json`` — the pipeline name and constructor params (a state file alone cannot
  rebuild its program), its roles with the predictors serving each, and the run it came from.
* ``messages.json`` (format ``json``) — ``{role: [{"role", "content"}, ...]}``, the messages of
  ``prompts.txt`` as data, for a client outside the tool to fill in and send.
* ``prompts.md`` / ``prompts.txt`` — per role, the exact messages the LM receives, rendered
  through :class:`~critiquelab.signatures.adapter.CodeAdapter` (the adapter runs use), with ``{name}``
  placeholders where the inputs go. Rendering through the real adapter is the point: a prompt
  re-typed by hand from the instruction would not be the prompt that was measured.

Round trip: a program exported and loaded back sends byte-identical LM requests (the test
checks it against the fake server). Demos are stored as JSON data; a bootstrapped demo whose
values were pydantic objects (a critic's findings) renders the same either way, which the
round-trip test covers. Exporting does not modify the program.

Anything read back is checked first: a file that is not a program state (the readable
``prompts.md``, some other JSON), a manifest without its pipeline, a state that would set a
predictor's own LM — each is one line naming the file and what was expected, never a
traceback and never a half-loaded program.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import dspy

from critiquelab.core.errors import UserError
from critiquelab.core.lookup import check_lookup
from critiquelab.optimizers.export_roles import exporting_pipeline, load_role_state, migrate_state, role_keyed
from critiquelab.pipelines.registry import create_pipeline, program_roles
from critiquelab.signatures.adapter import CodeAdapter

STATE_FILE = "program.json"
MANIFEST_FILE = "manifest.json"
MESSAGES_FILE = "messages.json"
FORMATS = ("json", "md", "txt", "mlflow")


def render_messages(predictor: Any, adapter: Any | None = None) -> list[dict[str, str]]:
    """The messages ``predictor`` sends, with ``{input}`` placeholders for its inputs."""
    adapter = adapter or CodeAdapter()
    inputs = {name: "{" + name + "}" for name in predictor.signature.input_fields}
    demos = [dict(d) for d in predictor.demos]
    messages: list[dict[str, str]] = adapter.format(predictor.signature, demos, inputs)
    return messages


def role_prompts(program: dspy.Module) -> dict[str, list[dict[str, str]]]:
    """``{role: messages}`` for every role a predictor of ``program`` serves (a role whose
    predictors send different messages: ``{predictor name: messages}`` for each)."""
    rendered = {name: render_messages(p) for name, p in program.named_predictors()}
    return role_keyed(program, rendered)


def to_markdown(prompts: Mapping[str, list[dict[str, str]]], title: str) -> str:
    lines = [f"# {title}", ""]
    for role, messages in prompts.items():
        lines += [f"## {role}", ""]
        for i, message in enumerate(messages, start=1):
            lines += [f"### {i}. {message['role']}", "", "````text", message["content"], "````", ""]
    return "\n".join(lines)


def to_text(prompts: Mapping[str, list[dict[str, str]]]) -> str:
    parts = []
    for role, messages in prompts.items():
        parts.append(f"===== {role} =====")
        for message in messages:
            parts.append(f"----- {message['role']} -----\n{message['content']}")
    return "\n".join(parts) + "\n"


def check_formats(formats: Iterable[str]) -> list[str]:
    """``formats`` as a list, refused (one line) if empty or naming an unknown format."""
    chosen = list(formats)
    unknown = sorted(set(chosen) - set(FORMATS))
    if unknown or not chosen:
        given = f"unknown export format(s) {', '.join(unknown)}" if unknown else "no export format given"
        raise UserError(f"{given}; choose from {', '.join(FORMATS)}")
    return chosen


def export_program(
    program: dspy.Module,
    out_dir: Path,
    *,
    pipeline: str,
    params: Mapping[str, Any] | None = None,
    formats: Iterable[str] = ("json", "md", "txt"),
    source: str = "",
) -> list[Path]:
    """Write ``program`` to ``out_dir`` in ``formats`` (``mlflow`` is :func:`register_prompts`)."""
    formats = set(check_formats(formats))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    # The state and manifest are always written: they are what every other format is made from.
    program.save(str(out_dir / STATE_FILE))
    saved = json.loads((out_dir / STATE_FILE).read_text())
    (out_dir / STATE_FILE).write_text(json.dumps(role_keyed(program, saved), indent=2) + "\n")
    roles = program_roles(program)
    manifest = {
        "pipeline": pipeline, "params": dict(params or {}), "source": source,
        "roles": {role: [name for name, _ in roles.predictors(program, role)] for role in roles.names
                  if roles.predictors(program, role)},
    }
    (out_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    written += [out_dir / STATE_FILE, out_dir / MANIFEST_FILE]
    prompts = role_prompts(program) if formats & {"json", "md", "txt"} else {}
    if "json" in formats:
        (out_dir / MESSAGES_FILE).write_text(json.dumps(prompts, indent=2))
        written.append(out_dir / MESSAGES_FILE)
    if "md" in formats:
        (out_dir / "prompts.md").write_text(to_markdown(prompts, f"{pipeline} prompts {source}".strip()))
        written.append(out_dir / "prompts.md")
    if "txt" in formats:
        (out_dir / "prompts.txt").write_text(to_text(prompts))
        written.append(out_dir / "prompts.txt")
    return written


EXPECTED = f"expected a `critiquelab export` directory or its {STATE_FILE}"
PREDICTOR_KEYS = {"signature", "demos", "lm", "traces", "train"}  # what ``Predict.dump_state`` writes


def state_path(path: Path) -> Path:
    """The ``program.json`` of an export directory (or the file itself)."""
    path = Path(path)
    check_lookup(path, str(path))
    state = path / STATE_FILE if path.is_dir() else path
    if not state.is_file():
        raise UserError(f"{path}: no exported program ({STATE_FILE}) there; {EXPECTED}")
    return state


def _state_problem(state: Any) -> str | None:
    """Why ``state`` is not a DSPy program state as :func:`export_program` writes it, or None."""
    if not isinstance(state, dict):
        return "not a JSON object"
    roles = {k: v for k, v in state.items() if k != "metadata"}
    if not roles:
        return "no roles in it"
    for role, predictor in roles.items():
        if not isinstance(predictor, dict) or not {"signature", "demos", "lm"} <= set(predictor):
            return f"'{role}' is not a predictor state (needs signature, demos, lm)"
        if set(predictor) - PREDICTOR_KEYS:
            return f"'{role}' has unexpected keys {sorted(set(predictor) - PREDICTOR_KEYS)}"
        signature = predictor["signature"]
        fields = signature.get("fields") if isinstance(signature, dict) else None
        if not (isinstance(signature, dict) and isinstance(signature.get("instructions"), str)
                and isinstance(fields, list)
                and all(isinstance(f, dict) and {"prefix", "description"} <= set(f) for f in fields)):
            return f"'{role}' has no signature instructions and fields"
        demos = predictor["demos"]
        if not isinstance(demos, list) or not all(isinstance(d, dict) for d in demos):
            return f"'{role}' demos are not a list of examples"
        if predictor["lm"] is not None:  # it would answer with its own LM, not the run's
            return f"'{role}' carries its own LM setting"
    return None


def read_state(path: Path) -> dict[str, Any]:
    """The checked DSPy state of an export directory or its ``program.json``."""
    state_file = state_path(path)
    problem: str | None
    try:
        state = json.loads(state_file.read_text())
    except (UnicodeDecodeError, ValueError):
        state, problem = None, "not JSON"
    except RecursionError:
        state, problem = None, "JSON nested too deeply"
    else:
        problem = _state_problem(state)
    if problem is not None:
        sibling = state_file.with_name(STATE_FILE)
        hint = f" ({state_file.parent} is one)" if state_file != sibling and sibling.is_file() else ""
        raise UserError(f"{state_file}: not an exported program ({problem}); {EXPECTED}{hint}")
    checked: dict[str, Any] = state  # _state_problem found nothing wrong: a JSON object
    return checked


REGISTRY_SCHEME = "prompts:/"
STATE_TAG = "critiquelab.state"  # a registered prompt version carries its role's DSPy state
PIPELINE_TAG = "critiquelab.pipeline"  # ...and the pipeline it was exported from


def prompts_state(source: str | Path, *, registry_uri: str | None = None) -> dict[str, Any]:
    """The DSPy state of exported prompts, as stored (by role; by predictor name in an export
    older than role declarations): from an export directory (or its ``program.json``), or from
    MLflow Prompt Registry URIs ``prompts:/NAME/VERSION`` (several, comma-separated, one per
    role) as ``critiquelab export --format mlflow`` registered them."""
    if not str(source).startswith(REGISTRY_SCHEME):
        return read_state(Path(source))
    return {key: value for key, value, _ in _registry_entries(str(source), registry_uri)}


def prompts_by_role(source: str | Path, *, registry_uri: str | None = None) -> dict[str, Any]:
    """The state of exported prompts keyed by role, whichever form it was stored in
    (:func:`critiquelab.optimizers.export_roles.migrate_state`, with the exporting pipeline's declaration)."""
    if not str(source).startswith(REGISTRY_SCHEME):
        state = read_state(Path(source))
        return migrate_state(state, exporting_pipeline(state_path(Path(source))))
    migrated: dict[str, Any] = {}
    for key, value, pipeline in _registry_entries(str(source), registry_uri):
        for role, state in migrate_state({key: value}, pipeline).items():
            migrated.setdefault(role, state)
    return migrated


def _registry_entries(text: str, registry_uri: str | None) -> list[tuple[str, Any, str | None]]:
    """``(role tag, state, exporting pipeline or None)`` of each ``prompts:/`` URI in ``text``."""
    if registry_uri is None:
        raise UserError(f"{text}: a Prompt Registry URI needs the MLflow store it lives in")
    local = registry_uri.removeprefix("sqlite:///") if registry_uri.startswith("sqlite:///") else None
    if local is not None and not Path(local).is_file():  # opening it would create an empty store
        raise UserError(f"{text}: no such prompt: there is no MLflow store at {registry_uri} yet")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=registry_uri, registry_uri=registry_uri)
    entries: list[tuple[str, Any, str | None]] = []
    for uri in (u.strip() for u in text.split(",") if u.strip()):
        try:
            version = client.load_prompt(uri)
        except Exception as exc:
            raise UserError(f"{uri}: no such prompt in the registry at {registry_uri} ({exc})") from exc
        tags = version.tags or {}
        if STATE_TAG not in tags or "critiquelab.role" not in tags:
            raise UserError(f"{uri}: not registered by `critiquelab export` (no role state on it)")
        try:
            entries.append((tags["critiquelab.role"], json.loads(tags[STATE_TAG]), tags.get(PIPELINE_TAG)))
        except ValueError:
            raise UserError(f"{uri}: its {STATE_TAG} tag is not JSON (edited by hand?)") from None
    problem = _state_problem({key: value for key, value, _ in entries})
    if problem is not None:
        raise UserError(f"{text}: not prompts registered by `critiquelab export` ({problem})")
    return entries


def prompts_fingerprint(source: str | Path, *, registry_uri: str | None = None) -> str:
    """SHA-256 of the state ``source`` holds: what a run's checkpoint key needs to know."""
    state = prompts_state(source, registry_uri=registry_uri)
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def load_prompts_into(
    program: dspy.Module, source: str | Path, *, registry_uri: str | None = None
) -> list[str]:
    """Load exported prompts (see :func:`prompts_by_role`) into ``program`` (in place), role by
    role: each predictor takes the state of the role its pipeline declares it serves.

    Predictors of ``program`` that the export has no state for keep theirs (a baseline can
    take the coder of an optimised critic loop, debate's proposer the coder of a critic loop);
    an export that matches no role at all is an error naming the pipeline, since then nothing
    would change. Returns the predictor names loaded.
    """
    return load_role_state(program, prompts_by_role(source, registry_uri=registry_uri), str(source))


def read_manifest(state_file: Path) -> dict[str, Any]:
    """The checked manifest next to ``state_file``: which pipeline, with which params."""
    manifest_path = state_file.with_name(MANIFEST_FILE)
    if not manifest_path.is_file():
        raise UserError(f"{state_file.parent}: no {MANIFEST_FILE}; cannot tell which pipeline it is")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (UnicodeDecodeError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("pipeline"), str) \
            or not isinstance(manifest.get("params", {}), dict):
        raise UserError(f"{manifest_path}: not a `critiquelab export` manifest; expected a JSON object "
                        "with 'pipeline' (a name) and 'params' (an object)")
    return manifest


def load_program(path: Path) -> tuple[dspy.Module, dict[str, Any]]:
    """Rebuild an exported program: the pipeline from the manifest, then its state."""
    state = state_path(path)
    read_state(state)  # a file that is no program is named before its manifest is read
    manifest = read_manifest(state)
    try:
        program = create_pipeline(manifest["pipeline"], **manifest.get("params", {}))
    except UserError as exc:
        raise UserError(f"{state.with_name(MANIFEST_FILE)}: {exc}") from exc
    load_prompts_into(program, state)
    return program, manifest


def _mlflow_template(messages: list[dict[str, str]], inputs: Iterable[str]) -> list[dict[str, str]]:
    """MLflow's variables are ``{{name}}``; turn our ``{name}`` placeholders into them."""
    out = []
    for message in messages:
        content = message["content"]
        for name in inputs:
            content = content.replace("{" + name + "}", "{{" + name + "}}")
        out.append({"role": message["role"], "content": content})
    return out


def register_prompts(
    program: dspy.Module, tracking_uri: str, *, prefix: str, run_id: str = "", message: str = ""
) -> dict[str, int]:
    """One MLflow Prompt Registry prompt per role (``{prefix}.{role}``), a new version per call,
    tagged with the run it came from. Returns ``{prompt name: version}``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    versions = {}
    roles = program_roles(program)
    predictors = dict(program.named_predictors())
    # One prompt per role (a role prompted differently per predictor: one per predictor).
    keyed = role_keyed(program, {n: p.dump_state() for n, p in predictors.items()})
    for name in keyed:
        predictor = predictors[name] if name not in roles.roles else roles.predictors(program, name)[0][1]
        template = _mlflow_template(render_messages(predictor), predictor.signature.input_fields)
        prompt_name = f"{prefix}.{name}".replace("/", "_")
        state = json.dumps(predictor.dump_state(), sort_keys=True)
        version = client.register_prompt(
            name=prompt_name, template=template, commit_message=message or f"export of {run_id or prefix}",
            tags={"critiquelab.run_id": run_id, "critiquelab.role": name, STATE_TAG: state,
                  PIPELINE_TAG: roles.pipeline},
        )
        versions[prompt_name] = int(version.version)
    return versions
