"""The searcher of tree search: expands, evaluates, reflects and backpropagates on the pool.

One agent owns the tree of one problem (its state must not be shared between threads); the role
calls it makes (coder, repairer, scorer, path reflector) are independent agents' work in the LATS
sense and each leaves a message: every node is a ``proposal`` whose metadata names its parent
node and the parent's message, so the tree can be rebuilt from the pool alone.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dspy

from critiquelab.eval import python_ast
from critiquelab.eval.assembly import assemble_program
from critiquelab.eval.visible_examples import debugging_feedback, run_examples, visible_examples
from critiquelab.pipelines.controls import oracle_feedback
from critiquelab.pipelines.tree_search.tree import SearchNode, SearchTree
from critiquelab.runtime.agents import Agent, TaskContext, sampling_config
from critiquelab.runtime.parallel_agents import ParallelCalls
from critiquelab.runtime.pool.messages import Intent, Message
from critiquelab.runtime.role_call import RoleResult, call_role

# Reflections shown to the repairer: the most recent ones (a small model's context is short), each
# cut at REFLECTION_CHARS: the 0.5B model's reflections can repeat one sentence until max_tokens.
REFLECTIONS_SHOWN = 3
REFLECTION_CHARS = 600
SCORE_MAX = 10


@dataclass(frozen=True)
class SearchSettings:
    """What the searcher needs of the pipeline's params (see ``TreeSearchParams``)."""

    n: int
    max_expansions: int
    token_budget: float | None
    w: float
    value_weight: float
    temperature: float
    evaluation: str
    stop: str
    reflect: bool
    greedy_first: bool
    parallel: int
    timeout_s: float
    oracle: bool = False  # the oracle_feedback control: the repairer reads the hidden tests' report


@dataclass(frozen=True)
class SearchRoles:
    """The predictors of the search's roles."""

    coder: dspy.Module
    repairer: dspy.Module
    scorer: dspy.Module
    reflector: dspy.Module


def _fingerprint(code: str, outcomes: list[tuple[str, str]]) -> str:
    """Behaviour on the visible examples; with none, the normalised syntax tree (CodeT-style)."""
    if outcomes:
        return repr(outcomes)
    try:
        return ast.dump(python_ast.parse(code))
    except SyntaxError:
        return f"unparsable:{code}"


class SearchAgent(Agent):
    """Runs LATS on the task it is assigned and publishes the chosen node as its verdict."""

    role = "searcher"

    def __init__(self, ctx: TaskContext, roles: SearchRoles, settings: SearchSettings) -> None:
        super().__init__(ctx)
        self.roles, self.settings = roles, settings
        self.tree = SearchTree()
        self.spent = 0
        self.expansions = 0
        self.reflections: list[str] = []
        self._fingerprints: dict[int, str] = {}  # node index -> behaviour on the visible examples
        # Only the examples visible in the prompt: hidden tests never reach a prompt.
        self.examples = visible_examples(ctx.prompt, ctx.entry_point)
        self.listen([Intent.TASK_ASSIGNMENT], to_me_only=True)

    # ------------------------------------------------------------------ the search loop

    def _budget_left(self) -> bool:
        budget = self.settings.token_budget
        return budget is None or self.spent < budget

    def handle(self, message: Message) -> None:
        self.tree.root.message_id = message.id
        stop_reason = "max_expansions"
        while self.expansions < self.settings.max_expansions:
            if not self._budget_left():
                stop_reason = "token_budget"
                break
            leaf = self.tree.select(self.settings.w)
            if leaf is None:
                stop_reason = "exhausted"
                break
            children = self._expand(leaf)
            self.expansions += 1
            if self.settings.stop == "first_pass" and any(child.solved for child in children):
                stop_reason = "solved"
                break
            failing = [child for child in children if not child.solved]
            more = self.expansions < self.settings.max_expansions and self._budget_left()
            if self.settings.reflect and failing and more:  # only a later repair reads it
                self._reflect(max(failing, key=lambda child: (child.score, -child.index)))
        self._publish_verdict(message, stop_reason)

    def _expand(self, leaf: SearchNode) -> list[SearchNode]:
        """Sample children of ``leaf``, run them on the visible examples, score them against
        each other and back their scores up the tree. The root's first child may be the greedy
        answer alone: when it already solves the visible examples (and the search stops at the
        first solution) no sample is drawn."""
        count = self.settings.n
        if leaf is self.tree.root and self.settings.greedy_first:
            children = self._generate([self._draw(leaf, greedy=True)])
            if count > 1 and not (children[0].solved and self.settings.stop == "first_pass"):
                children += self._generate([self._draw(leaf) for _ in range(count - 1)])
        else:
            children = self._generate([self._draw(leaf) for _ in range(count)])
        self._score(children)
        return children

    def _draw(
        self, parent: SearchNode, *, greedy: bool = False
    ) -> tuple[SearchNode, Callable[[], RoleResult]]:
        """A new node and the call that will give it code (made by :meth:`_generate`). The node's
        index is its seed, so what is drawn never depends on the order calls finish."""
        child = self.tree.add_child(parent)
        config = {} if greedy else sampling_config(child.index, self.settings.temperature)
        if parent is self.tree.root:
            return child, lambda: call_role(self.roles.coder, "coder", config=config, prompt=self.ctx.prompt)
        reflections = "\n".join(
            f"- {text[:REFLECTION_CHARS]}" for text in self.reflections[-REFLECTIONS_SHOWN:]
        ) or "none"
        # Only the control adds the field: every other run's request is the same as before.
        oracle = self.settings.oracle
        control: dict[str, Any] = {"test_results": oracle_feedback(parent.code)} if oracle else {}
        return child, lambda: call_role(
            self.roles.repairer, "repairer", config=config, prompt=self.ctx.prompt, code=parent.code,
            execution_feedback=parent.feedback, reflections=reflections, **control,
        )

    def _generate(self, draws: list[tuple[SearchNode, Callable[[], RoleResult]]]) -> list[SearchNode]:
        """Make the draws' calls (up to ``parallel`` at once), run each child on the visible
        examples (simulation) and publish it."""
        with ParallelCalls(self.settings.parallel) as calls:
            futures = [calls.submit(call) for _, call in draws]
            steps = [future.result() for future in futures]
        children = [child for child, _ in draws]
        for child, step in zip(children, steps, strict=True):
            self.spent += step.total_tokens
            # An expansion writes `code`, a repair `repaired_code`: each draw is one of the two.
            child.code = (step.code if step.declares("code") else step.repaired_code) or step.raw
            self._fingerprints[child.index] = self._simulate(child)
            self._publish_node(child, step)
        return children

    def _score(self, children: list[SearchNode]) -> None:
        """Each child's score from its pass rate and the other signal (the value role, or the
        share of siblings behaving like it), backed up the tree."""
        lm_scores = self._lm_scores(children)
        agreeing = Counter(self._fingerprints[child.index] for child in children)
        weight = self.settings.value_weight
        for child, lm_score in zip(children, lm_scores, strict=True):
            if self.settings.evaluation == "consistency":
                other: float | None = agreeing[self._fingerprints[child.index]] / len(children)
            else:
                other = lm_score
            if child.pass_rate is None:  # no visible example: the other signal is all there is
                child.score = other if other is not None else 0.0
            elif other is None:
                child.score = child.pass_rate
            else:
                child.score = weight * other + (1 - weight) * child.pass_rate
            self.tree.backpropagate(child, child.score)

    def _simulate(self, node: SearchNode) -> str:
        """Run the node's code on the visible examples: its pass rate, its feedback for the
        repairer, and its behaviour fingerprint."""
        program = assemble_program(self.ctx.prompt, node.code, self.ctx.entry_point)
        if not program.ok:
            node.pass_rate = 0.0 if self.examples else None
            node.feedback = f"the code does not compile: {program.syntax_error}"
            return f"syntax-error:{node.index}"  # agrees with nothing
        runs = run_examples(program.source, self.ctx.entry_point, self.examples,
                            timeout_s=self.settings.timeout_s)
        node.feedback = debugging_feedback(program.source, runs)
        if runs:
            node.pass_rate = sum(run.passed for run in runs) / len(runs)
            node.solved = node.pass_rate == 1.0
        return _fingerprint(program.source, [run.outcome.signature() for run in runs])

    def _lm_scores(self, children: list[SearchNode]) -> list[float | None]:
        """The value role's score of each child in [0, 1]; None where it is not asked (weight 0,
        consistency evaluation) or its reply cannot be read."""
        if self.settings.evaluation != "lm" or self.settings.value_weight == 0:
            return [None] * len(children)
        with ParallelCalls(self.settings.parallel) as calls:
            futures = [
                calls.submit(lambda c=child: call_role(
                    self.roles.scorer, "scorer", prompt=self.ctx.prompt, code=c.code,
                    execution_feedback=c.feedback,
                ))
                for child in children
            ]
            steps = [future.result() for future in futures]
        scores: list[float | None] = []
        for child, step in zip(children, steps, strict=True):
            self.spent += step.total_tokens
            raw = step.score
            score = min(max(int(raw), 0), SCORE_MAX) / SCORE_MAX if isinstance(raw, int) else None
            scores.append(score)
            self.ctx.publish(
                intent=Intent.VALUE, sender=self.ctx.agent_name("scorer"),
                content=str(step.assessment or step.raw),
                summary=f"node {child.index}: value {raw if score is not None else 'unparsed'}",
                in_reply_to=child.message_id, step=step, node=child.index, lm_score=score,
            )
        return scores

    def _reflect(self, node: SearchNode) -> None:
        """Reflect on the failed path from the root to ``node``; later repairs read the lesson."""
        attempts = "\n\n".join(
            f"Attempt {i}:\n```python\n{step.code.strip()}\n```\nFeedback:\n{step.feedback}"
            for i, step in enumerate(node.path(), start=1)
        )
        step = call_role(self.roles.reflector, "path_reflector", prompt=self.ctx.prompt, attempts=attempts)
        self.spent += step.total_tokens
        text = str(step.reflection or step.raw).strip()
        if text:
            self.reflections.append(text)
        self.ctx.publish(
            intent=Intent.REFLECTION, sender=self.ctx.agent_name("path_reflector"), content=text,
            summary=f"reflection on the path to node {node.index}", in_reply_to=node.message_id,
            step=step, node=node.index,
        )

    # ------------------------------------------------------------------ messages

    def _publish_node(self, node: SearchNode, step: RoleResult) -> None:
        parent = node.parent
        assert parent is not None
        role = "coder" if parent is self.tree.root else "repairer"
        message = self.ctx.publish(
            intent=Intent.PROPOSAL, sender=self.ctx.agent_name(role), content=node.code,
            summary=f"node {node.index} (depth {node.depth}, parent {parent.index})",
            in_reply_to=parent.message_id, step=step, node=node.index, parent_node=parent.index,
            parent_id=parent.message_id, depth=node.depth,
        )
        node.message_id = message.id
        self.ctx.publish(
            intent=Intent.EXECUTION_FEEDBACK, sender=self.ctx.agent_name("executor"),
            content=node.feedback, summary=f"node {node.index} on the visible examples",
            in_reply_to=message.id, node=node.index, pass_rate=node.pass_rate, solved=node.solved,
        )

    def tree_summary(self) -> list[dict[str, Any]]:
        """Every node's place and statistics, as plain data."""
        return [
            {"node": node.index, "parent": node.parent.index if node.parent else None,
             "message_id": node.message_id, "depth": node.depth, "visits": node.visits,
             "value": node.value, "score": node.score,
             "pass_rate": node.pass_rate, "solved": node.solved}
            for node in self.tree.nodes
        ]

    def _publish_verdict(self, assignment: Message, stop_reason: str) -> None:
        best = self.tree.best()
        self.ctx.publish(
            intent=Intent.VERDICT, sender=self.name, content=best.code if best else "",
            summary=f"node {best.index if best else '-'} chosen ({stop_reason})",
            in_reply_to=best.message_id if best else assignment.id,
            chosen=best.index if best else None, stop_reason=stop_reason,
            expansions=self.expansions, tokens=self.spent, tree=self.tree_summary(),
        )
