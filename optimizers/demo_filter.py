"""Code demos are kept only when their code passes the hidden tests of their task (issue #16).

``dspy.BootstrapFewShot`` (and MIPROv2's bootstrapping) turns *every* role call of a run whose
final answer passed into a demo. In a revising pipeline that run also holds the calls that
failed: the coder's first draft that the fixer had to correct (critic_loop), the tree search
coder whose code needed repairing and the sibling repairs that failed. The ``traces`` optimiser
has the same blind spot: an intermediate fix is labelled by its task's final outcome. A demo
showing a role writing wrong code teaches it to write wrong code, silently.

So after optimisation every demo whose outputs include code (a signature's ``str`` output
fields named ``*code``: coder.code, fixer.revised_code, repairer.repaired_code,
developer.module_code …; not the tests a role writes, test_code / acceptance_test_code, which
are no solution of the task) is scored on the hidden tests of its task, found by the demo's
``prompt`` (or ``task_id``) among the train problems, and dropped unless every code it shows
passes. Demos of roles without code output (scorer, critic, reflector …) are untouched, and so
is code that does not define the task's entry point (an architect developer's helper module):
the hidden tests cannot judge a part alone, and dropping it would drop every such demo.

This reads hidden tests only to score, exactly as the optimisers' metric does on the same train
problems; the demos kept are the ones already there, so no test text can enter a prompt.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from critiquelab.eval import python_ast
from critiquelab.eval.problems import Problem
from critiquelab.eval.scoring import score_code


def is_helper_module(code: str, entry_point: str) -> bool:
    """Whether ``code`` defines functions, none of them ``entry_point``: a part of a solution.
    A body without a ``def`` is not (the scorer completes it with the prompt's stub), nor is
    code that does not parse: both are judged, not waved through."""
    try:
        tree = python_ast.parse(code)
    except SyntaxError:
        return False
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    return bool(names) and entry_point not in names


def code_output_fields(signature: type[dspy.Signature]) -> tuple[str, ...]:
    """The output fields in which ``signature``'s role writes (part of) a solution."""
    return tuple(
        name for name, info in signature.output_fields.items()
        if name.endswith("code") and "test" not in name.split("_") and info.annotation is str
    )


@dataclass
class CodeDemoFilter:
    """Decides which demos to keep and counts, per role, the code demos it dropped.

    ``problems`` are where demos may come from (the train split); a code demo whose task is
    not among them cannot be checked and is dropped. ``roles``: only these roles' demos are
    judged (the roles an optimisation may change); None: every role."""

    problems: Sequence[Problem]
    timeout_s: float = 10.0  # the sandbox's limit per scoring, the config's (as for the metric)
    roles: Collection[str] | None = None
    dropped: Counter[str] = field(default_factory=Counter)  # role → code demos dropped so far
    _by_prompt: dict[str, Problem] = field(init=False, repr=False)
    _by_id: dict[str, Problem] = field(init=False, repr=False)
    _passed: dict[tuple[str, str], bool] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._by_prompt = {p.prompt.strip(): p for p in self.problems}
        self._by_id = {p.task_id: p for p in self.problems}

    def _problem_of(self, demo: Any) -> Problem | None:
        task_id = demo.get("task_id")
        if task_id is not None and str(task_id) in self._by_id:
            return self._by_id[str(task_id)]
        return self._by_prompt.get(str(demo.get("prompt") or "").strip())

    def _passes(self, problem: Problem, code: str) -> bool:
        # The same code recurs (one fix in several traces, a traces demo judged again after
        # compile's final pass): a sandbox run per distinct (task, code) is enough.
        key = (problem.task_id, code)
        if key not in self._passed:
            self._passed[key] = score_code(problem, code, self.timeout_s)[1].passed
        return self._passed[key]

    def keep(self, role: str, demo: Any, signature: type[dspy.Signature]) -> bool:
        """Whether ``demo`` of ``role`` (a predictor with ``signature``) may stay; a drop is counted.
        A demo with no code written (the judge chose a proposal and left merged_code empty)
        shows no code to check and stays."""
        if self.roles is not None and role not in self.roles:
            return True
        codes = [str(demo.get(name) or "") for name in code_output_fields(signature)]
        codes = [code for code in codes if code.strip()]
        if not codes:
            return True
        problem = self._problem_of(demo)
        if problem is not None:
            codes = [code for code in codes if not is_helper_module(code, problem.entry_point)]
            if not codes:
                return True  # parts of a solution only: nothing the hidden tests can judge alone
        kept = problem is not None and all(self._passes(problem, code) for code in codes)
        if not kept:
            self.dropped[role] += 1
        return kept
