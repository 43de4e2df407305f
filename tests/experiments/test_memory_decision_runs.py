"""The SOP line with memory on, through the runner (scripted LM): the QA engineer's verdicts are
remembered as decision_outcome entries with their visible outcome, and neither its generated
tests nor any hidden test reaches an entry."""

import json

from support.fake_openai import FakeOpenAIServer
from support.leakage import assert_no_hidden_tests
from support.role_responder import role_responder
from support.specs import fake_spec

from critiquelab.experiments.api import run
from critiquelab.runtime.memory.bank import MemoryBank

GENERATED = "assert has_close_elements([1.0, 1.05], 0.1) == True"


def test_sop_qa_verdicts_are_remembered_with_their_visible_outcome(home, humaneval_problems):
    problem = humaneval_problems[0]
    versions = iter([problem.prompt + "    return None\n", problem.prompt + problem.canonical_solution])
    scripts = {
        "product_manager": lambda t: {"spec": json.dumps({
            "function": problem.entry_point, "inputs": ["numbers", "threshold"], "output": "bool",
            "edge_cases": [], "examples": []})},
        "architect": lambda t: {"design": json.dumps({"signature": problem.entry_point, "helpers": [],
                                                      "approach": "compare every pair"})},
        "engineer": lambda t: {"implementation_code": next(versions)},
        "qa_engineer": lambda t: {"acceptance_test_code": GENERATED},
        "reflector": lambda t: {"what_went_wrong": "none", "what_worked": "tests", "pattern": "pairs",
                                "lesson": "compare every pair"},
    }
    pipelines = [{"name": "sop", "memory": {"enabled": True, "record": ["decision_outcome"]}}]
    with FakeOpenAIServer(role_responder(scripts)) as fake:
        run(fake_spec(fake.api_base, pipelines=pipelines, limit=1), progress=False)
    with MemoryBank(home) as bank:
        entries = [e for e in bank.episodic.all() if e.type == "decision_outcome"]
    # The failing verdict led to the canonical revision; the passing verdict was on it.
    assert sorted((e.role, e.context["decision"], e.context["visible_passed"]) for e in entries) == [
        ("qa_engineer", "qa_fail", True), ("qa_engineer", "qa_pass", True)]
    texts = [e.model_dump_json() for e in entries]
    assert assert_no_hidden_tests([problem], [{"messages": [{"content": t}]} for t in texts]) > 0
    assert not any("1.05" in t for t in texts)  # the generated test's call stays off the entries
