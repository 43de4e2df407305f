"""GEPA with a reflection LM of its own, limited to the roles an optimisation may change.

DSPy's GEPA proposes a new instruction for one predictor at a time, round robin over all of a
program's predictors, from the sandbox feedback of a minibatch; the reflection LM (the teacher,
e.g. the bundled 1.5B model) writes it. With ``optimizer.roles: [repairer]`` the other roles'
instructions are put back after compilation (:func:`critiquelab.optimizers.compile.keep_roles`), so without a
limit here GEPA would spend most of its metric calls — and tree search's are the costly ones —
evaluating coder, scorer and path-reflector instructions that are thrown away, and the candidate
it selects on validation would have been scored with instructions the kept program does not
have. :class:`RoleComponentSelector` makes GEPA propose for the chosen roles only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import dspy
from gepa.core.state import GEPAState

from critiquelab.optimizers.optimizer_params import GepaParams


class RoleComponentSelector:
    """GEPA's round robin over a candidate's predictors (``gepa``'s
    ``RoundRobinReflectionComponentSelector``), skipping those whose role may not change. The
    position is kept in GEPA's own state, so a resumed run (GEPA's ``log_dir``) continues it.
    ``role_of`` maps a predictor name to its role."""

    def __init__(self, roles: Collection[str], role_of: Callable[[str], str]) -> None:
        self.roles, self.role_of = frozenset(roles), role_of

    def __call__(
        self, state: GEPAState[Any, Any], trajectories: list[Any], subsample_scores: list[float],
        candidate_idx: int, candidate: dict[str, str],
    ) -> list[str]:
        names = state.list_of_named_predictors
        position = state.named_predictor_id_to_update_next_for_program_candidate
        start = position[candidate_idx]
        for offset in range(len(names)):
            index = (start + offset) % len(names)
            if self.role_of(names[index]) in self.roles:
                position[candidate_idx] = (index + 1) % len(names)
                return [names[index]]
        raise ValueError(f"GEPA: no predictor plays one of the roles {sorted(self.roles)}")  # checked before


def compile_gepa(
    student: dspy.Module, params: GepaParams, metric: Callable[..., dspy.Prediction],
    trainset: list[dspy.Example], valset: list[dspy.Example] | None, *, reflection_lm: dspy.BaseLM | None,
    seed: int, log_dir: Path | None, roles: Collection[str] | None, role_of: Callable[[str], str],
) -> dspy.Module:
    """``dspy.GEPA`` on ``student``: ``metric`` returns score and feedback, ``reflection_lm`` (the
    teacher, else the task LM of the surrounding context) writes the new instructions, the budget
    is ``auto`` or ``max_metric_calls`` (50 when neither is set). With ``roles``, only those roles'
    predictors get new instructions. ``log_dir``: GEPA saves its state there after every
    iteration and resumes from it when rerun."""
    selector: Any = "round_robin" if roles is None else RoleComponentSelector(roles, role_of)
    optimizer = dspy.GEPA(
        metric=metric, reflection_lm=reflection_lm, auto=params.auto,
        max_metric_calls=params.max_metric_calls or (None if params.auto else 50),
        reflection_minibatch_size=params.reflection_minibatch_size, num_threads=params.num_threads,
        seed=seed, component_selector=selector, log_dir=str(log_dir) if log_dir else None,
    )
    return optimizer.compile(student, trainset=trainset, valset=valset)
