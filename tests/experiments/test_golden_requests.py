"""Every shipped spec sends the same LM requests and produces the same figures as recorded.

A refactoring must not change behaviour: each shipped experiment spec runs on its first two
problems (each optimisation spec on a tiny split of eight) against a scripted LM
(:mod:`support.golden_lm`), and what reaches the endpoint (every request body, byte for byte, as
a digest), the checkpoint directories (their keys), the per-run metrics and each problem's
outcome must equal ``golden/<spec>.json``. After a change that is *meant* to alter requests,
regenerate with ``CRITIQUELAB_UPDATE_GOLDEN=1`` and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder

from experiments.api import optimize, run

SPECS = sorted(Path("experiments").glob("*.yaml"))
GOLDEN = Path(__file__).parent / "golden"
# Figures that measure time, not behaviour.
_TIMED = ("latency", "_s", "seconds", "wall", "tokens_per_s")


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]


def _figures(metrics: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in sorted(metrics.items()) if not any(t in k for t in _TIMED)}


def _outcomes(results: list[Any]) -> list[list[Any]]:
    return sorted([r.task_id, r.seed, r.status.value, r.iterations, r.lm_calls, r.prompt_tokens,
                   r.completion_tokens, hashlib.sha256(r.final_code.encode()).hexdigest()[:12]]
                  for r in results)


def _checkpoint_keys(home: Path) -> list[str]:
    return sorted(str(p.parent.relative_to(home)) for p in home.rglob("manifest.json"))


def _run_spec(path: Path, fake: FakeOpenAIServer, tmp_path: Path, home: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    data["model"] = {**data.get("model", {}), "id": "openai/fake", "api_base": fake.api_base,
                     "num_retries": 0}
    data["model"].pop("server", None)
    data["dataset"] = {**data.get("dataset", {}), "limit": 8 if "optimizer" in data else 2}
    if "optimizer" not in data:
        result = run(data, progress=False)
        return {"children": {c.pipeline: {"metrics": _figures(c.metrics), "outcomes": _outcomes(c.results)}
                             for c in result.children}}
    data["split"] = {"seed": data.get("split", {}).get("seed", 0), "train": 4, "val": 2}
    if "refine" in data:
        data["refine"]["model"] = {"id": "openai/fake", "api_base": fake.api_base}
    if "teacher" in data:
        data["teacher"] = {"id": "openai/fake", "api_base": fake.api_base}
    spec_file = tmp_path / path.name
    spec_file.write_text(yaml.safe_dump(data))
    result = optimize(spec_file, home=home)
    return {"steps": sorted(result.steps)}


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_shipped_spec_sends_the_recorded_requests(path, tmp_path, home, humaneval_problems):
    with FakeOpenAIServer(golden_responder(humaneval_problems), pass_body=True) as fake:
        found = _run_spec(path, fake, tmp_path, home)
        requests = [r for r in fake.requests if "messages" in r]
    found["requests"] = sorted(_digest(r) for r in requests)
    found["checkpoints"] = _checkpoint_keys(home)
    golden = GOLDEN / f"{path.stem}.json"
    if os.environ.get("CRITIQUELAB_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(golden.read_text())
    if found["requests"] != recorded["requests"]:  # keep the requests for a look at what moved
        (tmp_path / "requests.json").write_text(json.dumps(requests, indent=1, sort_keys=True))
    assert found == recorded, f"{path.name}: behaviour changed; this run's requests: {tmp_path}/requests.json"
