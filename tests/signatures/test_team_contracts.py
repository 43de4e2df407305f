"""The architect team's contracts, and the session tree's JSON Schema generated from them."""

import jsonschema
import pytest
from pydantic import ValidationError

from critiquelab.pipelines.architect.session_tree import session_tree_schema
from critiquelab.signatures.team_contracts import (
    VISIBLE_EXAMPLES_CRITERION,
    DeveloperInput,
    DeveloperOutput,
    ReviewerInput,
    ReviewerOutput,
    TaskAssignment,
)


def test_contracts_hold_typed_values_only():
    task = TaskAssignment(task_id="t1", function_name="f", description="do it")
    assert (task.priority, task.dependencies) == ("medium", [])
    with pytest.raises(ValidationError):
        TaskAssignment(task_id="t1", function_name="f", description="x", priority="urgent")
    with pytest.raises(ValidationError):
        DeveloperOutput(task_id="t1", status="done")
    with pytest.raises(ValidationError):
        DeveloperInput(task=task, allowed_functions=["f"], attempt=0)
    with pytest.raises(ValidationError):
        ReviewerOutput(verdict="approve", verification={"examples": 1, "passed": 1, "report": "PASS"})
    assert ReviewerInput(scope="all").criteria == [VISIBLE_EXAMPLES_CRITERION]


EXAMPLE = {
    "task_id": "HumanEval/0", "thread_id": "abc",
    "root": {
        "session_id": "architect", "kind": "orchestrator", "agent": "architect@abc",
        "messages": [
            {"id": "m1", "intent": "plan", "sender": "architect@abc", "contract": "ArchitectPlan",
             "payload": {"tasks": [{"task_id": "t1", "function_name": "f", "description": "d"}],
                         "waves": [["t1"]], "notes": []}},
            {"id": "m2", "intent": "task_assignment", "sender": "architect@abc",
             "recipient": "developer0@abc", "contract": "DeveloperInput",
             "payload": {"task": {"task_id": "t1", "function_name": "f", "description": "d"},
                         "context": "", "allowed_functions": ["f"], "attempt": 1}},
        ],
        "children": [{
            "session_id": "t1/iteration1/attempt1", "kind": "developer", "agent": "developer0@abc",
            "parent_session": "architect", "trigger_message_id": "m2",
            "messages": [{"id": "m3", "intent": "output.complete", "sender": "developer0@abc",
                          "in_reply_to": "m2", "contract": "DeveloperOutput",
                          "payload": {"task_id": "t1", "status": "completed", "code": "def f(): pass"}}],
            "children": [],
        }, {
            "session_id": "review/iteration1", "kind": "reviewer", "agent": "reviewer@abc",
            "parent_session": "architect", "trigger_message_id": "m4",
            "messages": [{"id": "m5", "intent": "critique", "sender": "reviewer@abc",
                          "contract": "ReviewerOutput",
                          "payload": {"verdict": "changes_requested",
                                      "findings": [{"id": "F1", "severity": "major", "category": "bug",
                                                    "line": 2, "description": "off by one",
                                                    "suggestion": "use <="}],
                                      "verification": {"examples": 2, "passed": 1, "report": "PASS\nFAIL"},
                                      "summary": "fix it"}}],
            "children": [],
        }],
    },
}


def test_example_session_data_validates_against_the_generated_schema():
    schema = session_tree_schema()
    jsonschema.validate(EXAMPLE, schema)
    bad_status = {**EXAMPLE, "root": {**EXAMPLE["root"], "children": [{
        **EXAMPLE["root"]["children"][0],
        "messages": [{"id": "m3", "intent": "x", "sender": "d", "contract": "DeveloperOutput",
                      "payload": {"task_id": "t1", "status": "done"}}],
    }]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_status, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**EXAMPLE, "root": {**EXAMPLE["root"], "kind": "manager"}}, schema)
