"""Group candidate solutions by what they do on the visible examples (CodeT-style agreement).

Used by the vote pipeline to pick the largest group and by the debate pipeline to measure
agreement among debaters. Only visible example inputs are run; hidden tests never are.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from eval.assembly import assemble_program
from eval.execution import call_function
from eval.visible_examples import visible_examples


def behaviour_signatures(
    prompt: str, entry_point: str, codes: Sequence[str], *, timeout_s: float = 5.0
) -> list[str]:
    """One hashable fingerprint per candidate: its outcomes on the visible example inputs, or,
    when the prompt shows no runnable example, its normalised syntax tree."""
    calls = [example.args for example in visible_examples(prompt, entry_point)]
    fingerprints = []
    for code in codes:
        program = assemble_program(prompt, code, entry_point)
        if not program.ok:
            fingerprints.append(f"syntax-error:{len(fingerprints)}")  # never agrees with anything
        elif calls:
            outcomes = call_function(program.source, entry_point, calls, timeout_s=timeout_s)
            fingerprints.append(repr([o.signature() for o in outcomes]))
        else:
            fingerprints.append(ast.dump(ast.parse(program.source)))
    return fingerprints


def largest_group(fingerprints: Sequence[str]) -> list[int]:
    """Indices of the largest group of equal fingerprints; ties go to the group seen first."""
    groups: dict[str, list[int]] = {}
    for index, fingerprint in enumerate(fingerprints):
        groups.setdefault(fingerprint, []).append(index)
    return max(groups.values(), key=len) if groups else []
