"""A scripted LM that answers every role of every pipeline, deterministically from the request.

Used by the golden test of the shipped specs (``tests/experiments/test_golden_requests.py``): the
same spec must send the same requests before and after a refactoring, so every reply here
depends only on the request (its text, temperature and seed), never on the order requests arrive
in. Drafts are wrong and revisions right, and samples alternate by seed, so loops, repairs,
selection and memory all have something to do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from support.role_responder import ScriptedProblems, review, role_responder

INSTRUCTION = "Write the complete function the docstring describes."


def _entry(text: str) -> str:
    match = re.search(r"\[\[ ## entry_point ## \]\]\n(\w+)", text)
    return match.group(1) if match else "f"


def golden_responder(problems: list[Any]) -> Callable[..., str]:
    """The responder (``pass_body=True``) for :class:`support.fake_openai.FakeOpenAIServer`."""
    scripted = ScriptedProblems(problems)
    solution, wrong = scripted.solution, scripted.wrong

    def code_is_wrong(text: str) -> bool:
        return "return None" in text.rsplit("## code", 1)[-1]

    def coder(text: str, body: dict[str, Any]) -> dict[str, str]:
        if body.get("temperature", 0) > 0:  # samples: every other seed is right
            return {"code": solution(text) if body.get("seed", 0) % 2 else wrong(text)}
        return {"code": solution(text) if "## reviews" in text else wrong(text)}

    def architect(text: str, body: dict[str, Any]) -> Any:
        if "`tasks`" in text.split("All interactions", 1)[0]:
            task = {"task_id": "main", "function_name": _entry(text), "description": "all of it"}
            return {"tasks": json.dumps([task])}
        design = {"signature": f"def {_entry(text)}(*args):", "helpers": [], "approach": "as documented"}
        return {"design": json.dumps(design)}

    def spec(text: str, body: dict[str, Any]) -> dict[str, str]:
        entry = _entry(text)
        return {"spec": json.dumps({"function": entry, "inputs": ["x"], "output": "the result",
                                    "edge_cases": ["empty input"], "examples": [f"{entry}(1)"]})}

    def instructor(text: str, body: dict[str, Any]) -> dict[str, str]:
        done = "PASS" in text
        return {"instruction": "" if done else "Implement the docstring.", "task_done": str(done)}

    static: dict[str, dict[str, str]] = {
        "judge": {"choice": "1", "rationale": "the first is right", "merged_code": ""},
        "pairwise_judge": {"reason": "the docstring asks for the second", "right_output": "B"},
        "meta_critic": {"wrong_findings": "[]", "missing_issues": "[]", "review_is_sound": "True"},
        "scorer": {"assessment": "plausible", "score": "5"},
        "path_reflector": {"reflection": "It returns None; compute the result."},
        "reflector": {"what_went_wrong": "it returned None", "what_worked": "reading the examples",
                      "pattern": "missing return", "lesson": "Return the computed value."},
        "analyst": {"approach": "follow the docstring", "edge_cases": '["empty input"]'},
        "team_reviewer": {"verdict": "approved", "findings": "[]", "summary": "fine"},
        "task_specifier": {"specified_task": "Implement the function as documented."},
    }

    def scripts(role: str) -> Callable[[str, dict[str, Any]], Any]:
        by_role: dict[str, Callable[[str, dict[str, Any]], Any]] = {
            "coder": coder,
            "architect": architect,
            "product_manager": spec,
            "instructor": instructor,
            "critic": lambda t, b: review("request_changes", "returns None") if code_is_wrong(t)
            else review("approve"),
            "self_feedback": lambda t, b: {"is_correct": str(not code_is_wrong(t)),
                                           "feedback": "return the value" if code_is_wrong(t) else ""},
            "fixer": lambda t, b: {"revised_code": solution(t)},
            "repairer": lambda t, b: {"repaired_code": solution(t)},
            "debater": lambda t, b: {"argument": "the docstring says so", "revised_code": solution(t)},
            "developer": lambda t, b: {"module_code": solution(t)},
            "engineer": lambda t, b: {"implementation_code": solution(t)},
            "assistant": lambda t, b: {"solution_code": solution(t)},
            "qa_engineer": lambda t, b: {"acceptance_test_code": f"assert {_entry(t)} is not None"},
            "test_writer": lambda t, b: {"test_code": f"assert {_entry(t)}(1) == 1"},
            "input_writer": lambda t, b: {"inputs": json.dumps([f"{scripted.problem_in(t).entry_point}()"])},
        }
        if role in by_role:
            return by_role[role]
        if role in static:
            return lambda t, b: static[role]
        return other

    def other(text: str, body: dict[str, Any]) -> Any:
        """Requests of no pipeline role: an optimiser's own (DSPy's instruction proposers, with
        their output fields named in the system message) or TextGrad's (plain text)."""
        fields = re.findall(r"^\d+\. `(\w+)`", text.split("All interactions", 1)[0], flags=re.M)
        outputs = fields[len(re.findall(r"^\d+\. `(\w+)`", text.split("Your output fields", 1)[0],
                                        flags=re.M)):] if "Your output fields" in text else []
        if outputs:
            return {name: INSTRUCTION for name in outputs}
        if "IMPROVED_VARIABLE" in text:
            return f"<IMPROVED_VARIABLE>{INSTRUCTION}</IMPROVED_VARIABLE>"
        return "The code returns None; it should compute the documented result."

    class _Scripts(dict):  # role_responder looks scripts up by role; build them on demand
        def __missing__(self, role: str) -> Callable[[str, dict[str, Any]], Any]:
            return scripts(role)

    return role_responder(_Scripts(), with_body=True)
