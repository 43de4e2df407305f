"""A memory run killed after a task wrote its memory but before the task's checkpoint, then run
again: the store ends as an uninterrupted run's — each task's entries once, a promoted skill
once, and each use of it counted once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from support.fake_openai import FakeOpenAIServer
from support.role_responder import ScriptedProblems, role_responder
from support.specs import fake_spec

from critiquelab.runtime.memory.bank import MemoryBank

ROOT = Path(__file__).parents[2]
KILL_AT = ROOT / "tests" / "support" / "kill_at.py"
LESSON = "Check the boundary cases named in the docstring before returning."
# Every task reflects the same lesson: the second promotes it to a skill (approval auto), which
# the third task receives, so the third task's memory holds an entry and a skill use.
MEMORY = {"enabled": True, "approval": "auto", "promote_after": 2, "record": ["error_pattern"]}


@pytest.fixture(scope="module")
def spec_path(humaneval_problems, tmp_path_factory):
    scripted = ScriptedProblems(humaneval_problems)
    responder = role_responder({
        "coder": lambda text: {"code": scripted.solution(text)},
        "reflector": lambda text: {"what_went_wrong": "nothing", "what_worked": "the examples",
                                   "pattern": "boundary cases", "lesson": LESSON},
    })
    with FakeOpenAIServer(responder) as fake:
        path = tmp_path_factory.mktemp("spec") / "spec.yaml"
        pipelines = [{"name": "baseline", "label": "baseline+memory", "memory": MEMORY}]
        path.write_text(yaml.safe_dump(fake_spec(fake.api_base, pipelines=pipelines, limit=3,
                                                 pool={"persist": False})))
        yield path


def _critiquelab(home: Path, spec: Path, *kill: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "CRITIQUELAB_HOME": str(home), "PYTHONPATH": path}
    start = [str(KILL_AT), *kill, "--"] if kill else ["-m", "critiquelab.experiments.cli"]
    return subprocess.run([sys.executable, *start, "run", str(spec), "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=300)


def _store(home: Path) -> tuple[Counter, list[tuple[int, int]], int]:
    with MemoryBank(home) as bank:
        entries = Counter((e.task_id, e.type) for e in bank.episodic.all())
        skills = [(s.times_used, s.times_succeeded) for s in bank.skills.list()]
        return entries, skills, len(bank.proposals.list(status=None))


def test_a_task_solved_again_after_a_kill_leaves_its_memory_once(spec_path, tmp_path):
    straight = tmp_path / "straight"
    assert _critiquelab(straight, spec_path).returncode == 0
    killed = tmp_path / "killed"
    # Just before the third task's checkpoint line: its memory is written, its result is not.
    stopped = _critiquelab(killed, spec_path,
                           "critiquelab.experiments.checkpoints:CheckpointStore.append", "3",
                           "--before")
    assert stopped.returncode == -9, stopped.stderr
    entries, skills, _ = _store(killed)
    assert sum(entries.values()) == 3 and skills == [(1, 1)]  # the third task's memory is there

    resumed = _critiquelab(killed, spec_path)
    assert resumed.returncode == 0, resumed.stderr
    expected = _store(straight)
    assert expected[0] == Counter({(f"HumanEval/{i}", "reflection"): 1 for i in range(3)})
    assert expected[1] == [(1, 1)]
    assert _store(killed) == expected
