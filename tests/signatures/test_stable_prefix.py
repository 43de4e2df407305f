"""Stable prefixes: every role puts what a problem's calls share — its instruction, then the
problem — before what varies from call to call (code under review, other agents' proposals,
feedback). A server that keeps a slot's prompt prefix (llama-server) then evaluates only the
varying tail when the same role is called again on the same problem (debaters within a round,
vote samples, fixer iterations, tree-search expansions)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import dspy
import pytest

from critiquelab import signatures
from critiquelab.signatures.adapter import CodeAdapter

PROBLEM = 'def add(a: int, b: int) -> int:\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'


def _role_signatures() -> list[type[dspy.Signature]]:
    found = []
    for info in pkgutil.iter_modules(signatures.__path__):
        module = importlib.import_module(f"critiquelab.signatures.{info.name}")
        found += [
            obj for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, dspy.Signature) and obj is not dspy.Signature
            and obj.__module__ == module.__name__ and "prompt" in obj.input_fields
        ]
    return found


ROLES = _role_signatures()


def test_the_roles_are_found() -> None:
    assert {"Coder", "Critic", "Fixer", "Debater", "Judge"} <= {s.__name__ for s in ROLES}


@pytest.mark.parametrize("signature", ROLES, ids=lambda s: s.__name__)
def test_the_problem_is_the_first_input(signature: type[dspy.Signature]) -> None:
    assert next(iter(signature.input_fields)) == "prompt"


def _rendered(signature: type[dspy.Signature], variant: str) -> str:
    inputs = {name: PROBLEM if name == "prompt" else f"{name} of call {variant}"
              for name in signature.input_fields}
    messages = CodeAdapter().format(signature, demos=[], inputs=inputs)
    return "\n".join(f"<{m['role']}>\n{m['content']}" for m in messages)


@pytest.mark.parametrize(
    "signature",
    [s for s in ROLES if all(f.annotation is str for f in s.input_fields.values())],
    ids=lambda s: s.__name__,
)
def test_two_calls_on_one_problem_share_the_instruction_and_the_problem(
    signature: type[dspy.Signature],
) -> None:
    first, second = _rendered(signature, "A"), _rendered(signature, "B")
    shared = 0
    while shared < min(len(first), len(second)) and first[shared] == second[shared]:
        shared += 1
    prefix = first[:shared]
    assert signature.instructions.split()[0] in prefix
    assert PROBLEM.strip() in prefix
