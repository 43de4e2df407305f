"""Every shipped spec sends the same LM requests and produces the same figures as recorded.

A refactoring must not change behaviour: each shipped experiment spec runs on its first two
problems (each optimisation spec, every step, on a tiny split of eight) against a scripted LM
(:mod:`support.golden_lm`), and what reaches the endpoint (every request body, byte for byte, as
a digest), the per-run metrics, each problem's outcome and the cost keys ``--estimate`` matches
earlier problems by must equal ``golden/<spec>.json``. (Checkpoint directories are keyed by a
fingerprint of the code itself, so they change with any change of code by design; the LM cache,
keyed by the requests, is what lets a data directory made by older code replay without a model.)
After a change that is *meant* to alter requests, regenerate with ``CRITIQUELAB_UPDATE_GOLDEN=1``
and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder

from critiquelab.experiments.api import run
from critiquelab.pipelines.registry import params_model

SPECS = sorted(Path("experiments").glob("*.yaml"))
GOLDEN = Path(__file__).parent / "golden"
# Figures that measure time, not behaviour.
_TIMED = ("latency", "_s", "seconds", "wall", "tokens_per_s")


_MEMORY_ID = re.compile(r"\[m-[0-9a-f]{12}\]")


def _digest(body: dict[str, Any]) -> str:
    # Memory entry ids are random (uuid4) and shown to the model with each recalled entry, so the
    # same memory run never sends quite the same request twice; the digest reads them as one id.
    text = _MEMORY_ID.sub("[m-ID]", json.dumps(body, sort_keys=True))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _figures(metrics: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in sorted(metrics.items()) if not any(t in k for t in _TIMED)}


def _outcomes(results: list[Any]) -> list[list[Any]]:
    return sorted([r.task_id, r.seed, r.status.value, r.iterations, r.lm_calls, r.prompt_tokens,
                   r.completion_tokens, hashlib.sha256(r.final_code.encode()).hexdigest()[:12]]
                  for r in results)


def _cost_keys(data: dict[str, Any]) -> dict[str, str]:
    """The per-pipeline cost keys, for a fixed model identity (the fake endpoint's port varies)."""
    from critiquelab.experiments.checkpoints import cost_keys
    from critiquelab.experiments.spec.experiment import parse_spec

    return cost_keys(parse_spec(data), "golden-model", "humaneval", {})


def _run_spec(path: Path, fake: FakeOpenAIServer, tmp_path: Path, home: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    data["model"] = {**data.get("model", {}), "id": "openai/fake", "api_base": fake.api_base,
                     "num_retries": 0}
    data["model"].pop("server", None)
    data["dataset"] = {**data.get("dataset", {}), "limit": 8 if "optimizer" in data else 2}
    if "optimizer" not in data:
        keys = _cost_keys(data)  # with the spec's own role models (the fake endpoint's port varies)
        for entry in data["pipelines"]:
            if entry["name"] == "scratchpad":
                # In parallel mode what the coder's first draft sees of the analyst's work depends
                # on which thread writes first (the mode's point), so its requests vary with load.
                entry.setdefault("params", {})["mode"] = "sequential"
            for role in entry.get("roles", {}).values():
                if "model" in role:  # a role's own model (local-1.5b) is scripted by the fake too
                    role.update(model="openai/fake", api_base=fake.api_base)
        result = run(data, progress=False)
        children = {c.pipeline: {"metrics": _figures(c.metrics), "outcomes": _outcomes(c.results)}
                    for c in result.children}
        return {"cost_keys": keys, "children": children}
    data["split"] = {"seed": data.get("split", {}).get("seed", 0), "train": 4, "val": 2}
    if "refine" in data:
        data["refine"]["model"] = {"id": "openai/fake", "api_base": fake.api_base}
    if "teacher" in data:
        data["teacher"] = {"id": "openai/fake", "api_base": fake.api_base}
    # DSPy's BootstrapFewShot picks one of a predictor's several calls in a run at random, seeded
    # by a hash of the pickled demos (set-valued fields pickle in the process's string-hash order)
    # and their order in the trace (overlapping role calls append in finishing order). One call at
    # a time and a fixed PYTHONHASHSEED, in a process of its own, make that choice repeat. Set, not
    # dropped: some pipelines (vote) default to several calls at once. Requests do not depend on it.
    if "parallel_agents" in params_model(data["pipeline"]["name"]).model_fields:
        data["pipeline"].setdefault("params", {})["parallel_agents"] = 1
    spec_file = tmp_path / path.name
    spec_file.write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONHASHSEED": "0", "CRITIQUELAB_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "critiquelab.experiments.cli", "optimize", str(spec_file)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {}


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_shipped_spec_sends_the_recorded_requests(path, tmp_path, home, humaneval_problems):
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        found = _run_spec(path, fake, tmp_path, home)
        requests = [r for r in fake.requests if "messages" in r]
    # Distinct requests: two problems in flight may both miss the LM cache with the same request
    # (a race, not behaviour), so how often one is sent may vary.
    found["requests"] = sorted({_digest(r) for r in requests})
    golden = GOLDEN / f"{path.stem}.json"
    if os.environ.get("CRITIQUELAB_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(golden.read_text())
    if found["requests"] != recorded["requests"]:  # keep the requests for a look at what moved
        (tmp_path / "requests.json").write_text(json.dumps(requests, indent=1, sort_keys=True))
    assert found == recorded, f"{path.name}: behaviour changed; this run's requests: {tmp_path}/requests.json"
