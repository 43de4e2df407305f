"""The per-problem figures of ``tree_search``: the search, and every node judged on the hidden
tests after it (was a right node in the tree, and did selection miss it?)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Self

from pydantic import Field

from critiquelab.pipelines.attribution import SELECTION_ENDS, selection_end
from critiquelab.pipelines.outcomes import FigureGroup, Outcome, Scored


class SearchFigures(FigureGroup):
    """A search tree whose nodes are scored after the search."""

    nodes_passed: list[bool] | None = Field(
        default=None, description="Set by the scorer: each node's program on the hidden tests, in node order."
    )

    @classmethod
    def summarise_run(cls, rows: Sequence[Scored[Self]]) -> dict[str, float]:
        """How often the tree held a node that passes the hidden tests, how often the search then
        answered with another (selection's share of the failures), and nodes per problem."""
        scored = [r for r in rows if r.figures.nodes_passed is not None]
        if not scored:
            return {}
        held = [r for r in scored if any(r.figures.nodes_passed or [])]
        return {
            "tree_has_passing_node_rate": len(held) / len(scored),
            "passing_node_not_chosen": sum(not r.passed for r in held),
            "mean_nodes": sum(len(r.figures.nodes_passed or []) for r in scored) / len(scored),
        }

    ENDS: ClassVar[tuple[str, ...]] = SELECTION_ENDS

    @classmethod
    def attribute(cls, row: Scored[Self]) -> str | None:
        """Where the problem ended among the tree's nodes:
        :func:`critiquelab.pipelines.attribution.selection_end`."""
        return selection_end(row.passed, row.figures.nodes_passed)


class TreeSearchOutcome(Outcome, SearchFigures):  # type: ignore[misc]  # plugin false positive: see critiquelab.pipelines.outcomes
    """Figures of ``tree_search``."""

    nodes: int = Field(description="Programs in the tree (proposals).")
    expansions: int = Field(description="Expansions made.")
    max_depth: int = Field(description="Depth of the deepest node.")
    visible_solved: bool = Field(description="Whether some node passed every visible example.")
    stop_reason: str = Field(description="Why the search stopped (solved, max_expansions, token_budget …).")
    reflections: int = Field(description="Reflections on a failed path.")
    messages: int = Field(description="Messages on the problem's thread.")
