"""Roles declared once: which predictors of a pipeline serve which role.

A role is the name a pipeline's calls are made and reported as (``call_role(…, "coder")``, the
pool's traces, ``role.NAME.*`` metrics, an experiment's per-role models) *and* the name its
prompts go by for the optimisers, ``critiquelab export`` and ``run --prompts``. The predictor
that serves a role is an attribute of the ``dspy.Module`` whose name need not be the role's
(debate's ``proposer`` serves ``coder``; renaming it would change saved programs), so the
pipeline's registration says it once::

    @register_pipeline("debate", params=..., outcome=...,
                       roles={"coder": "proposer", "debater": "debater", "judge": "judge"})

A role's value is a predictor path as ``named_predictors()`` gives it (``"proposer"``;
``"team.coder"`` inside a sub-module; a ``ChainOfThought``'s ``.predict`` and list indices are
ignored), several paths, ``()`` for a role with no predictor of the pipeline's own, or a
:class:`Role` that also names the other names its calls are made as (a panel's
``critic_correctness`` calls are the ``critic`` role's). A plain tuple of names declares roles
each served by the predictor of the same name. Everything that maps a predictor to a role, or
a role to its predictors, asks :func:`critiquelab.pipelines.registry.program_roles` (a :class:`RoleMap`),
never the attribute name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from critiquelab.core.errors import UserError


@dataclass(frozen=True)
class Role:
    """The predictors serving one role, and other names its calls are made as."""

    predictors: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()


RoleDeclaration = Sequence[str] | Mapping[str, str | Sequence[str] | Role]


def predictor_path(name: str) -> str:
    """A ``named_predictors()`` name without what is not the attribute path: ``critics[0]`` and
    ``critics.0`` are ``critics``, ``coder.predict`` (a ``ChainOfThought``) is ``coder``."""
    path = re.sub(r"\[\d+\]", "", name)
    parts = [p for p in path.split(".") if p and not p.isdigit()]
    if len(parts) > 1 and parts[-1] == "predict":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass(frozen=True)
class RoleMap:
    """A pipeline's roles: ``{role: Role}`` in declaration order."""

    pipeline: str
    roles: Mapping[str, Role]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.roles)

    def predictor_names(self) -> dict[str, list[str]]:
        """``{role: [predictor path, …]}`` as declared."""
        return {name: list(role.predictors) for name, role in self.roles.items()}

    def role_of(self, predictor: str) -> str:
        """The role the predictor named ``predictor`` (a ``named_predictors()`` name) serves; a
        predictor no role declares is an error naming the pipeline."""
        found = self.find_role(predictor)
        if found is None:
            raise UserError(
                f"pipeline '{self.pipeline}': predictor '{predictor}' serves no declared role "
                f"({', '.join(self.names)}); declare it in register_pipeline(roles=...)"
            )
        return found

    def find_role(self, predictor: str) -> str | None:
        path = predictor_path(predictor)
        return next((name for name, role in self.roles.items() if path in role.predictors), None)

    def role_of_call(self, call: str) -> str | None:
        """The role a call made as ``call`` (``call_role``'s name, a trace's role) is, or None."""
        if call in self.roles:
            return call
        return next((name for name, role in self.roles.items() if call in role.calls), None)

    def predictors(self, program: Any, role: str) -> list[tuple[str, Any]]:
        """``(name, predictor)`` of ``program`` serving ``role``."""
        return [(name, p) for name, p in program.named_predictors() if self.find_role(name) == role]


def declare_roles(pipeline: str, declaration: RoleDeclaration) -> RoleMap:
    """The :class:`RoleMap` a registration's ``roles=`` declares, checked: a predictor path
    serves one role only, and no call name is another role's."""
    if isinstance(declaration, str):
        raise TypeError(f"pipeline '{pipeline}': roles must be a tuple or a mapping, not a string")
    if isinstance(declaration, Mapping):
        roles = {str(name): _role(pipeline, str(name), value) for name, value in declaration.items()}
    else:
        roles = {str(name): Role(predictors=(str(name),)) for name in declaration}
    owner: dict[str, str] = {}
    for name, role in roles.items():
        for path in (*role.predictors, *role.calls):
            if (path in owner and owner[path] != name) or (path in roles and path != name):
                raise ValueError(f"pipeline '{pipeline}': '{path}' is declared for role '{name}' and "
                                 f"'{owner.get(path, path)}'")
            owner[path] = name
    return RoleMap(pipeline, roles)


def _role(pipeline: str, name: str, value: str | Sequence[str] | Role) -> Role:
    if isinstance(value, Role):
        return Role(tuple(predictor_path(p) for p in value.predictors), tuple(value.calls))
    if isinstance(value, str):
        return Role((predictor_path(value),))
    if not all(isinstance(p, str) for p in value):
        raise TypeError(f"pipeline '{pipeline}': role '{name}' must name predictor paths, got {value!r}")
    return Role(tuple(predictor_path(p) for p in value))


def legacy_role(predictor: str) -> str:
    """What a predictor's role was taken to be before roles were declared: its last attribute
    name. Used only for a program no registration describes (an ad-hoc ``dspy.Module``)."""
    parts = predictor_path(predictor).split(".")
    return parts[-1] if parts else predictor


def undeclared_roles(program: Any) -> RoleMap:
    """The roles of a module no registration describes (an ad-hoc ``dspy.Module``): one per
    predictor, named after its attribute. A registered pipeline's are
    :func:`critiquelab.pipelines.registry.program_roles`."""
    names: dict[str, Role] = {}
    for name, _ in program.named_predictors():
        role = legacy_role(name)
        previous = names.get(role, Role())
        names[role] = Role((*previous.predictors, predictor_path(name)))
    return RoleMap(type(program).__name__, names)


__all__ = [
    "Role", "RoleDeclaration", "RoleMap", "declare_roles", "legacy_role", "predictor_path",
    "undeclared_roles",
]
