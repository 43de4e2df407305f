"""`critiquelab export RUN_ID` of a plain run: the prompts each role was sent, which `run --prompts`
takes back. Round trip over every shipped experiment spec: a run, its export, and the same spec
run with the export as each pipeline's prompts send the same requests (scripted LM, 1 problem)."""

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder
from support.specs import fake_spec

from critiquelab.experiments.api import export, run
from critiquelab.experiments.cli.main import main
from critiquelab.pipelines.controls import NO_CONTROL

SPECS = [p for p in sorted(Path("experiments").glob("*.yaml"))
         if "optimizer" not in yaml.safe_load(p.read_text())]
_MEMORY_ID = re.compile(r"\[m-[0-9a-f]{12}\]")  # memory entry ids are random (see the golden test)


def _digests(requests):
    texts = (_MEMORY_ID.sub("[m-ID]", json.dumps(r, sort_keys=True)) for r in requests if "messages" in r)
    return sorted({hashlib.sha256(text.encode()).hexdigest() for text in texts})


def _on_fake(path, api_base):
    data = yaml.safe_load(path.read_text())
    data["model"] = {**data.get("model", {}), "id": "openai/fake", "api_base": api_base, "num_retries": 0}
    data["model"].pop("server", None)
    data["dataset"] = {**data.get("dataset", {}), "limit": 1}
    for entry in data["pipelines"]:
        if entry["name"] == "scratchpad":  # parallel mode's requests vary with load (golden test)
            entry.setdefault("params", {})["mode"] = "sequential"
        for role in entry.get("roles", {}).values():
            if "model" in role:
                role.update(model="openai/fake", api_base=api_base)
    return data


def test_every_shipped_spec_is_one_experiment_spec():
    assert len(SPECS) >= 15 and not any(p.stem.startswith("optimize_") for p in SPECS)


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_run_prompts_round_trips_the_export_of_a_plain_run(path, tmp_path, humaneval_problems):
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        data = _on_fake(path, fake.api_base)
        first = run(data, home=tmp_path / "a", progress=False, compare=False, cache=False)
        sent = _digests(fake.requests)
        fake.requests.clear()
        exported = export(first.parent_run_id, out=tmp_path / "export", home=tmp_path / "a")
        labels = {c.pipeline for c in first.children if c.control == NO_CONTROL}
        folders = {p.parent for p in map(Path, exported["files"])}
        one = len(labels) == 1  # one pipeline: the export directory itself, else one per label
        by_label = {next(iter(labels)): tmp_path / "export"} if one else {f.name: f for f in folders}
        assert set(by_label) == labels
        for entry in data["pipelines"]:
            label = entry.get("label") or entry["name"]
            if label in by_label:
                entry["prompts"] = str(by_label[label])
        again = run(data, home=tmp_path / "b", progress=False, compare=False, cache=False)
        assert _digests(fake.requests) == sent
    assert [c.metrics["pass_at_1"] for c in again.children] == [c.metrics["pass_at_1"]
                                                                for c in first.children]
    files = {"program.json", "manifest.json", "messages.json", "prompts.md", "prompts.txt", "sent.json"}
    for folder in by_label.values():
        assert files <= {p.name for p in folder.iterdir()}
    memory = {e.get("label") or e["name"] for e in data["pipelines"] if e.get("memory")}
    assert all(notice.split(":")[0] in memory for notice in exported["notices"]), exported["notices"]


def test_a_plain_child_run_exports_what_its_roles_were_sent(tmp_path, home, humaneval_problems, capsys):
    pipelines = [{"name": "debate", "params": {"debaters": 2, "rounds": 1}}]
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        result = run(fake_spec(fake.api_base, limit=1, pipelines=pipelines), progress=False)
    (child,) = result.children
    out = tmp_path / "out"
    assert main(["export", child.run_id, "--format", "json,md,txt,mlflow", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "MLflow prompt critiquelab.debate.coder version 1" in printed.out and not printed.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pipeline"] == "debate" and manifest["source"] == child.run_id
    assert manifest["params"]["debaters"] == 2 and manifest["roles"]["coder"] == ["proposer"]
    sent = json.loads((out / "sent.json").read_text())
    assert set(sent) == {"coder", "debater", "judge"}
    rendered = json.loads((out / "messages.json").read_text())
    for role, recorded in sent.items():  # the system message as sent is the exported one
        assert recorded["messages"][0] == rendered[role][0], role
        assert recorded["task_id"] == "HumanEval/0"
    assert "## coder" in (out / "prompts.md").read_text()
