"""tree_search: Language Agent Tree Search (LATS, arXiv 2310.04406) over program states.

Each node is an implementation with what it did on the prompt's *visible* examples. Selection
follows UCT from the root to a leaf; expansion samples ``n`` children (the coder below the root,
a repairer given the node's real execution feedback and the reflections so far below that);
each child is evaluated as ``value_weight · LM score + (1 − value_weight) · visible pass rate``
(or with agreement among its siblings in place of the LM score); its score is backed up the
tree; a failed expansion leaves a reflection on its best path for later repairs. The search
stops at the first node that passes every visible example (``stop: first_pass``) or searches
on (``stop: exhaust``) until ``max_expansions`` or the token budget is spent; the answer is the
best node. Hidden tests are never run here, except for the oracle_feedback control: its repairer
also reads what the hidden tests say about the node it repairs (:mod:`critiquelab.pipelines.controls`), while
selection, values and stopping still follow the visible examples alone.
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import AliasChoices, Field

from critiquelab.pipelines.budget import TokenBudgetParams, require_resolved
from critiquelab.pipelines.controls import ORACLE_FEEDBACK, ControlArm
from critiquelab.pipelines.params import FeedbackTimeout, ParallelAgents, SamplingTemperature
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.threads import converse
from critiquelab.pipelines.tree_search.agents import SearchAgent, SearchRoles, SearchSettings
from critiquelab.pipelines.tree_search.outcome import TreeSearchOutcome
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.runtime.pool.messages import Intent
from critiquelab.signatures.code_scorer import CodeScorer
from critiquelab.signatures.coder import Coder
from critiquelab.signatures.path_reflector import PathReflector
from critiquelab.signatures.repairer import Repairer
from critiquelab.signatures.test_results import with_test_results


class TreeSearchParams(TokenBudgetParams):
    """Parameters of ``tree_search``. With a token budget the search starts no expansion once
    the budget is spent (the expansion under way finishes: its calls are independent samples)."""

    n: int = Field(default=3, ge=1, description="Children sampled per expansion.")
    max_expansions: int = Field(
        default=6, ge=1, description="Most expansions (select a leaf, sample its n children) per problem."
    )
    w: float = Field(
        default=1.0, ge=0, description="UCT exploration weight: V(s) + w·sqrt(ln N(parent) / N(s))."
    )
    value_weight: float = Field(
        default=0.0, ge=0, le=1, validation_alias=AliasChoices("value_weight", "lambda"),
        description="λ (also accepted as `lambda`): a node's score is λ · (LM score, or sibling "
        "agreement with evaluation: consistency) + (1 − λ) · its pass rate on the visible examples. "
        "0 asks no value role.",
    )
    temperature: SamplingTemperature = Field(default=0.8, description="Sampling temperature of the children.")
    evaluation: Literal["lm", "consistency"] = Field(
        default="lm",
        description="What λ weighs against the pass rate: the scorer role's 0–10 judgement (lm), or the "
        "share of the node's siblings behaving identically on the visible examples (consistency).",
    )
    stop: Literal["first_pass", "exhaust"] = Field(
        default="first_pass",
        description="first_pass: stop at an expansion that yields a node passing every visible example; "
        "exhaust: search until max_expansions or the budget, then answer with the best node.",
    )
    reflect: bool = Field(
        default=True,
        description="After an expansion with no solution (and before another), reflect on the path to "
        "its best child; later repairs read the last reflections.",
    )
    greedy_first: bool = Field(
        default=True,
        description="The root's first child is the greedy answer (the baseline's request), drawn alone; "
        "when it passes every visible example and stop is first_pass, nothing is sampled.",
    )
    parallel_agents: ParallelAgents = Field(
        default=1,
        description="Role calls of one expansion made at once (children, their scores). Results do "
        "not depend on it: each child's seed is its node index.",
    )
    feedback_timeout_s: FeedbackTimeout = Field(
        description="Wall-clock limit in seconds per visible example run."
    )
    control: ControlArm


@register_pipeline(
    "tree_search", params=TreeSearchParams, outcome=TreeSearchOutcome,
    roles=("coder", "repairer", "scorer", "path_reflector"),
)
class TreeSearch(dspy.Module):
    """Language Agent Tree Search over programs: UCT selection, n sampled children (coder, then a
    repairer reading real execution feedback on the visible examples), value = λ·LM score +
    (1−λ)·visible pass rate, reflections on failed paths, backpropagation, a token budget; as the
    oracle_feedback control the repairer also reads the hidden tests' report.

    Parameters: :class:`TreeSearchParams` (``TreeSearch(TreeSearchParams(n=3, max_expansions=4))``).
    """

    def __init__(self, params: TreeSearchParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else TreeSearchParams.defaults()
        require_resolved("tree_search", self.params)
        self.coder = dspy.Predict(Coder)
        self.oracle = self.params.control == ORACLE_FEEDBACK
        self.repairer = dspy.Predict(with_test_results(Repairer) if self.oracle else Repairer)
        self.scorer = dspy.Predict(CodeScorer)
        self.path_reflector = dspy.Predict(PathReflector)

    def _settings(self) -> SearchSettings:
        p = self.params
        return SearchSettings(
            n=p.n, max_expansions=p.max_expansions, token_budget=p.token_budget, w=p.w,
            value_weight=p.value_weight, temperature=p.temperature, evaluation=p.evaluation,
            stop=p.stop, reflect=p.reflect, greedy_first=p.greedy_first,
            parallel=p.parallel_agents, timeout_s=p.feedback_timeout_s, oracle=self.oracle,
        )

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        roles = SearchRoles(self.coder, self.repairer, self.scorer, self.path_reflector)
        searcher = SearchAgent(ctx, roles, self._settings())
        history = converse(ctx, [searcher], searcher.name)
        verdict = next(m for m in reversed(history) if m.intent == Intent.VERDICT)
        nodes = [m.content for m in history if m.intent == Intent.PROPOSAL]
        solved = [node["solved"] for node in verdict.metadata["tree"][1:]]
        return dspy.Prediction(code=verdict.content, outcome=TreeSearchOutcome(
            iterations=max(1, verdict.metadata["expansions"]), thread_id=ctx.thread_id,
            nodes=len(nodes), expansions=verdict.metadata["expansions"],
            max_depth=max((node["depth"] for node in verdict.metadata["tree"]), default=0),
            visible_solved=any(solved), stop_reason=verdict.metadata["stop_reason"],
            reflections=sum(m.intent == Intent.REFLECTION for m in history), messages=len(history),
            # Every node scored on the hidden tests after the search: was a right node in the tree?
            codes_to_score={"nodes_passed": nodes},
        ))
