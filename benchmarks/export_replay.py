"""The exported prompt outside the harness: an optimised program's exported messages sent with a
plain OpenAI-compatible HTTP client (no DSPy) on the optimisation's held-out problems, scored in
the sandbox beside the harness's own held-out run of the same program.

``critiquelab export`` writes each role's messages as the LM receives them, with ``{input}``
placeholders (``messages.json``; ``prompts.txt`` shows the same to a reader). This script fills
the coder's placeholder with each held-out problem's prompt, sends the request with ``urllib`` to
the bundled model's server (started as the harness starts it, ``critiquelab.experiments.serving.provision``)
or to ``--api-base``, reads the code from the reply and scores it on the hidden tests. It prints
how many requests were byte-identical to the ones the harness recorded for those problems
(messages and settings, as JSON), how many replies were the recorded replies, and pass@1 of both.
Same requests at temperature 0, same answers, same pass@1: that is what exporting compiled prompts
has to mean for a user. Nothing is written to the data directory, and no LM cache is used.

    .venv/bin/python benchmarks/export_replay.py TARGET [--home DIR] [--limit 20]
        [--api-base URL [--model NAME]]

TARGET is an optimisation's run id (its kept program), its compile or refine step's run id (that
program, kept or not), or a directory ``critiquelab export`` wrote for one of those runs (its
manifest names the run). Only the baseline pipeline is replayed: its coder's one request is the
whole program, while other pipelines choose among several calls with code of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from critiquelab.core.errors import UserError
from critiquelab.eval.datasets import load_problems
from critiquelab.eval.problems import Problem
from critiquelab.eval.scoring import score_code
from critiquelab.experiments.api import export, offline_defaults
from critiquelab.experiments.paths import data_dir
from critiquelab.experiments.serving.provision import resolve_model, serve_model
from critiquelab.experiments.spec.experiment import ExperimentSpec, ModelSpec, parse_spec
from critiquelab.experiments.tracking.store import PARENT_TAG, child_key, tracking_uri
from critiquelab.experiments.viewer.data import ViewerData, message_trace
from critiquelab.optimizers.export import MESSAGES_FILE, read_manifest, state_path

ROLE = "coder"  # the baseline's one role
_PLACEHOLDER = re.compile(r"(```python\n)?\{(\w+)\}(\n```)?")
# The harness's coder reads its code from the reply this way (signatures/adapter.py,
# CodeAdapter.parse), restated so that reading the reply needs no DSPy either.
_FENCED = re.compile(r"```[ \t]*(?:python|py|python3)?[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_DEFINES = re.compile(r"^\s*(async\s+)?def ", re.MULTILINE)


def fill(template: list[dict[str, str]], inputs: Mapping[str, str]) -> list[dict[str, str]]:
    """``template``'s messages with the inputs in the last one (the earlier ones are the instruction
    and the demos, whose text is literal). A placeholder fenced as Python takes its value without
    leading and trailing line breaks, as the adapter renders a code input; one pass, so a value
    that itself contains ``{prompt}`` stays as it is."""

    def value(match: re.Match[str]) -> str:
        opened, name, closed = match.group(1) or "", match.group(2), match.group(3) or ""
        if name not in inputs:
            return match.group(0)
        text = inputs[name].strip("\n") if opened and closed else inputs[name]
        return f"{opened}{text}{closed}"

    *before, last = template
    return [*map(dict, before), {**last, "content": _PLACEHOLDER.sub(value, last["content"])}]


def code_of(reply: str) -> str:
    """The code in a reply: the first fenced block that defines something, else the longest
    block, else the whole reply."""
    blocks = _FENCED.findall(reply)
    defining = [b for b in blocks if _DEFINES.search(b)]
    code = (defining[0] if defining else max(blocks, key=len)) if blocks else reply
    return str(code).strip("\n")


@dataclass(frozen=True)
class HeldOut:
    """The harness's held-out test of one optimised program: the experiment it ran as, and the run
    of the program in it."""

    spec: ExperimentSpec
    run_id: str
    seed: int
    label: str


def _optimisation(client: Any, run_id: str) -> tuple[Any, str]:
    """The optimisation run ``run_id`` is or belongs to, and the candidate its program is."""
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        raise UserError(f"'{run_id}': no such run in the tracking store") from exc
    tags = run.data.tags
    if tags.get("critiquelab.kind") == "optimize":
        kept = tags.get("critiquelab.kept", "")
        if kept not in ("compiled", "refined"):
            raise UserError(f"optimisation {run_id} kept the unoptimised pipeline: no program of it was "
                            "exported; give its compile step's run id to replay the rejected candidate")
        return run, kept
    candidate = {"compile": "compiled", "refine": "refined"}.get(run.info.run_name or "")
    parent = client.get_run(tags[PARENT_TAG]) if PARENT_TAG in tags else None
    if candidate is None or parent is None or parent.data.tags.get("critiquelab.kind") != "optimize":
        raise UserError(f"run {run_id} is neither an optimisation nor its compile or refine step")
    return parent, candidate


def held_out_run(home: Path, source: str, scratch: Path) -> HeldOut:
    """Where the harness tested the program that came from run ``source`` on held-out problems."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri(home, None))
    parent, candidate = _optimisation(client, source)
    steps = client.search_runs([parent.info.experiment_id],
                               filter_string=f"tags.`{PARENT_TAG}` = '{parent.info.run_id}'")
    tested = [s.data.tags["critiquelab.test_run"] for s in steps
              if s.info.run_name == "test" and "critiquelab.test_run" in s.data.tags]
    if not tested:
        raise UserError(f"optimisation {parent.info.run_id} has not finished its held-out test")
    experiment = client.get_run(tested[0])
    config = Path(client.download_artifacts(tested[0], "config.yaml", str(scratch)))
    spec = parse_spec(yaml.safe_load(config.read_text()), "config.yaml of the held-out test")
    children = client.search_runs([experiment.info.experiment_id],
                                  filter_string=f"tags.`{PARENT_TAG}` = '{tested[0]}'")
    for child in children:
        label, _, seed = child_key(child).partition("/seed=")
        if label.endswith(f"+{candidate}"):
            return HeldOut(spec, child.info.run_id, int(seed), label)
    raise UserError(f"the held-out test {tested[0]} has no run of the {candidate} program")


@dataclass(frozen=True)
class Recorded:
    """One held-out problem as the harness ran it: its verdict, its coder request (messages and
    the settings that decide the reply) and the reply."""

    problem: Problem
    passed: bool
    request: dict[str, Any]
    reply: str


def recorded(home: Path, held_out: HeldOut, limit: int) -> list[Recorded]:
    """The first ``limit`` problems of the held-out test, as the harness recorded them."""
    dataset = held_out.spec.dataset
    problems = load_problems(dataset.location, dataset.fields, None, dataset.task_ids,
                             dataset_format=dataset.format, challenge_tests=dataset.challenge_tests,
                             split=dataset.split)
    data = ViewerData(tracking_uri(home, None))
    found = []
    for problem in problems[:limit]:
        result, messages = data.problem(held_out.run_id, problem.task_id)
        exchanges = [e for m in messages if message_trace(m).get("role") == ROLE
                     for e in message_trace(m).get("exchanges") or [] if "settings" in e]
        if not exchanges:  # runs before exchanges kept their settings did not record them
            raise UserError(f"run {held_out.run_id} recorded no {ROLE} request for {problem.task_id}")
        request = {"messages": exchanges[0]["request"], "settings": exchanges[0]["settings"]}
        reply = str((exchanges[0].get("replies") or [""])[0])
        found.append(Recorded(problem, result.passed, request, reply))
    return found


@contextlib.contextmanager
def endpoint(model: ModelSpec, api_base: str | None, name: str | None) -> Iterator[tuple[str, str]]:
    """``(api_base, model name)`` to send to: ``--api-base``; else the bundled model served as the
    harness serves it (same server, slots and context); else the spec's own endpoint. The name
    is the one the harness sends (LiteLLM drops the ``openai/`` provider prefix)."""
    if api_base is None and model.api_base is None:
        identity = resolve_model(model)
        if not identity.is_local:
            raise UserError(f"model '{model.id}' is no bundled model and has no api_base: give --api-base")
        with tempfile.TemporaryDirectory() as logs, \
                serve_model(identity, model, Path(logs), cache="off") as lm:
            yield str(lm.kwargs["api_base"]), str(lm.model).removeprefix("openai/")
        return
    yield str(api_base or model.api_base), name or model.id.removeprefix("openai/")


def body(model: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The HTTP body of ``request``, keys in the order and under the names LiteLLM sends them."""
    settings = dict(request["settings"])
    return {"model": model, "messages": request["messages"],
            "max_completion_tokens": settings.pop("max_tokens"), **settings}


def send(api_base: str, payload: dict[str, Any]) -> str:
    """POST one chat completion; the reply's text."""
    post = urllib.request.Request(
        f"{api_base.rstrip('/')}/chat/completions", data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer local"},
    )
    try:
        with urllib.request.urlopen(post, timeout=600) as response:
            reply = json.load(response)
    except urllib.error.URLError as exc:
        raise UserError(f"{api_base}: {exc}") from exc
    return str(reply["choices"][0]["message"]["content"] or "")


def _same(a: Any, b: Any) -> bool:
    """Byte for byte as JSON, whatever order the recorded settings were kept in."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def exported(target: str, home: Path, scratch: Path) -> tuple[list[dict[str, str]], str]:
    """The coder's messages of the exported program, and the run it came from: ``target`` is a
    `critiquelab export` directory, or a run id exported here as ``critiquelab export RUN`` would."""
    directory = Path(target)
    if not directory.exists():
        directory = scratch / "export"
        export(target, formats=["json"], out=directory, home=home)
    manifest = read_manifest(state_path(directory))
    if manifest["pipeline"] != "baseline":
        raise UserError(f"{target}: a '{manifest['pipeline']}' program; only the baseline's one coder "
                        "request per problem can be replayed without the pipeline's own code")
    if not (directory / MESSAGES_FILE).is_file():
        raise UserError(f"{directory}: no {MESSAGES_FILE}; export with `--format json`")
    if not manifest.get("source"):
        raise UserError(f"{directory}: its manifest names no run it came from")
    return json.loads((directory / MESSAGES_FILE).read_text())[ROLE], str(manifest["source"])


def replay(target: str, home: Path, limit: int, api_base: str | None, model_name: str | None) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        template, source = exported(target, home, Path(scratch))
        held_out = held_out_run(home, source, Path(scratch))
    harness = recorded(home, held_out, limit)
    model = held_out.spec.model
    settings = {"temperature": model.temperature, "max_tokens": model.max_tokens,
                **({"seed": held_out.seed} if model.send_seed else {})}
    requests = [{"messages": fill(template, {"prompt": r.problem.prompt}), "settings": settings}
                for r in harness]
    with endpoint(model, api_base, model_name) as (base, name):
        replies = [send(base, body(name, request)) for request in requests]
    passed = [score_code(r.problem, code_of(reply), held_out.spec.execution.timeout_s)[1].passed
              for r, reply in zip(harness, replies, strict=True)]
    n, pairs = len(harness), list(zip(harness, requests, replies, passed, strict=True))
    same_requests = sum(_same(request, r.request) for r, request, _, _ in pairs)
    same_replies = sum(reply == r.reply for r, _, reply, _ in pairs)
    differ = [r.problem.task_id for r, _, _, p in pairs if p != r.passed]
    print(f"{n} held-out problems of {held_out.label} (run {held_out.run_id}), sent with a plain client")
    print(f"requests byte-identical to the harness's: {same_requests}/{n}")
    print(f"replies identical to the harness's: {same_replies}/{n}")
    print(f"pass@1 replayed {sum(passed) / n:.3f}, harness {sum(r.passed for r in harness) / n:.3f}")
    print(f"scored differently: {', '.join(differ) if differ else 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("target", help="an optimisation's run id, its compile/refine run id, or an export "
                        "directory")
    parser.add_argument("--home", type=Path, default=None, help="the data directory (default: as run)")
    parser.add_argument("--limit", type=int, default=20, help="held-out problems to replay (default 20)")
    parser.add_argument("--api-base", default=None, help="send here instead of serving the bundled model")
    parser.add_argument("--model", default=None, help="the model name to send with --api-base")
    args = parser.parse_args(argv)
    offline_defaults()
    try:
        replay(args.target, args.home or data_dir(), args.limit, args.api_base, args.model)
    except UserError as exc:
        print(f"export_replay: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
