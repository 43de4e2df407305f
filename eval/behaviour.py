"""Group candidate solutions by what they do on the visible examples (CodeT-style agreement).

Used by the vote pipeline to pick the largest group and by the debate pipeline to measure
agreement among debaters. Only visible example inputs are run; hidden tests never are.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from critiquelab.eval import python_ast
from critiquelab.eval.assembly import assemble_program
from critiquelab.eval.visible_examples import run_examples, visible_examples


def visible_verdicts(
    prompt: str, entry_point: str, codes: Sequence[str], *, timeout_s: float = 5.0
) -> list[tuple[str, bool]]:
    """Per candidate: its fingerprint (its outcomes on the visible example inputs, or, when the
    prompt shows no runnable example, its normalised syntax tree) and whether it returns the
    expected value on every visible example (vacuously where the prompt shows none; never for a
    program that does not assemble)."""
    examples = visible_examples(prompt, entry_point)
    verdicts: list[tuple[str, bool]] = []
    for code in codes:
        program = assemble_program(prompt, code, entry_point)
        if not program.ok:
            verdicts.append((f"syntax-error:{len(verdicts)}", False))  # never agrees with anything
        elif examples:
            runs = run_examples(program.source, entry_point, examples, timeout_s=timeout_s)
            verdicts.append((repr([run.outcome.signature() for run in runs]), all(r.passed for r in runs)))
        else:
            verdicts.append((ast.dump(python_ast.parse(program.source)), True))
    return verdicts


def behaviour_signatures(
    prompt: str, entry_point: str, codes: Sequence[str], *, timeout_s: float = 5.0
) -> list[str]:
    """One hashable fingerprint per candidate, as :func:`visible_verdicts` gives it."""
    verdicts = visible_verdicts(prompt, entry_point, codes, timeout_s=timeout_s)
    return [fingerprint for fingerprint, _ in verdicts]


def largest_group(fingerprints: Sequence[str]) -> list[int]:
    """Indices of the largest group of equal fingerprints; ties go to the group seen first."""
    groups: dict[str, list[int]] = {}
    for index, fingerprint in enumerate(fingerprints):
        groups.setdefault(fingerprint, []).append(index)
    return max(groups.values(), key=len) if groups else []


def filtered_largest_group(fingerprints: Sequence[str], passes: Sequence[bool]) -> list[int]:
    """The largest group among the candidates that pass every visible example (AlphaCode's
    filter, then clustering); when none does, the largest group of all."""
    kept = [index for index, passed in enumerate(passes) if passed] or list(range(len(fingerprints)))
    return [kept[i] for i in largest_group([fingerprints[index] for index in kept])]
