"""Injection goes through a typed signature field only when memory is on: with memory off every
pipeline's prompts are byte-identical to those before memory existed."""

import hashlib
import json

import dspy

from critiquelab.pipelines.registry import create_pipeline
from critiquelab.runtime.memory.injection import enable_memory
from critiquelab.signatures.adapter import CodeAdapter
from critiquelab.signatures.memory import MEMORIES_FIELD, role_of

# sha256[:16] of each predictor's rendered messages, computed on main before memory existed
# (commit a4e2645), for every input field filled with the same docstring-like text.
BEFORE_MEMORY = {
    "baseline.coder": "3c9687c9d85378c6",
    "critic_loop.coder": "3c9687c9d85378c6",
    "critic_loop.critic": "d901b5e7759b2493",
    "critic_loop.fixer": "2caceb5f2b2fbb4c",
    "self_refine.coder": "3c9687c9d85378c6",
    "self_refine.feedback": "eb9a679c8812b9f5",
    "self_refine.refiner": "2caceb5f2b2fbb4c",
    "debate.proposer": "3c9687c9d85378c6",
    # debater and judge: their field descriptions changed on purpose (issue #57: prose-only
    # arguments, code once, no docstring), not by memory
    "debate.debater": "e5d20eb128ff4b0a",
    "debate.judge": "87cfef53702a0080",
    "vote.coder": "3c9687c9d85378c6",
}


def _value(field):
    return f'def f(x):\n    """{field} value\n    >>> f(1)\n    2\n    """\n'


def _rendered(signature, **extra):
    inputs = {name: _value(name) for name in signature.input_fields} | extra
    return CodeAdapter().format(signature, demos=[], inputs=inputs)


def _digest(messages):
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


def test_memory_off_renders_every_pipeline_role_exactly_as_before():
    found = {}
    for pipeline_name in sorted({key.split(".")[0] for key in BEFORE_MEMORY}):
        for name, predictor in create_pipeline(pipeline_name).named_predictors():
            found[f"{pipeline_name}.{name}"] = _digest(_rendered(predictor.signature))
    assert found == BEFORE_MEMORY


def test_memory_on_adds_a_typed_field_to_the_chosen_roles_only():
    pipeline = create_pipeline("critic_loop")
    assert enable_memory(pipeline, ["coder", "fixer"]) == ["coder", "fixer"]
    predictors = dict(pipeline.named_predictors())
    assert MEMORIES_FIELD in predictors["coder"].signature.input_fields
    assert MEMORIES_FIELD not in predictors["critic"].signature.input_fields
    assert role_of(predictors["fixer"].signature) == "fixer"
    system, user = _rendered(predictors["coder"].signature, memories="[m-1] Check empty inputs first.")
    assert "- memories: Lessons and skills recalled from earlier tasks" in system["content"]
    assert user["content"].endswith("memories:\n[m-1] Check empty inputs first.")
    # Instructions stay what they were; DSPy sees the field (export and optimisers read it).
    plain = create_pipeline("baseline").coder.signature
    assert predictors["coder"].signature.instructions == plain.instructions
    assert isinstance(predictors["coder"], dspy.Predict)
