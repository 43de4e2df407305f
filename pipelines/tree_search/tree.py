"""The tree of tree search (LATS, arXiv 2310.04406): nodes, UCT selection, backpropagation.

Pure bookkeeping, no model and no sandbox, so the search's decisions can be tested on their own.
A node is a program state: its code, what it did on the visible examples, its evaluation and the
statistics Monte Carlo tree search keeps (visits, mean value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class SearchNode:
    """One program state. The root holds no code: its children are the first implementations."""

    index: int  # creation order; the root is 0
    parent: SearchNode | None = None
    code: str = ""
    feedback: str = ""  # what the code did on the visible examples, as the repairer reads it
    pass_rate: float | None = None  # share of visible examples passed; None: the prompt shows none
    score: float = 0.0  # this node's own evaluation, in [0, 1]
    solved: bool = False  # passes every visible example
    message_id: str = ""  # its message on the pool
    children: list[SearchNode] = field(default_factory=list)
    visits: int = 0
    value_sum: float = 0.0

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def value(self) -> float:
        """Mean backed-up value, V(s); 0 before the first visit."""
        return self.value_sum / self.visits if self.visits else 0.0

    def path(self) -> list[SearchNode]:
        """The nodes with code from the root's child down to this node."""
        nodes: list[SearchNode] = []
        node: SearchNode | None = self
        while node is not None and node.parent is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


def uct(node: SearchNode, w: float) -> float:
    """``V(s) + w·sqrt(ln N(parent) / N(s))``; an unvisited node comes first."""
    if node.visits == 0 or node.parent is None:
        return math.inf
    parent_visits = max(node.parent.visits, 1)
    return node.value + w * math.sqrt(math.log(parent_visits) / node.visits)


class SearchTree:
    """The nodes of one problem's search, created in order, and the MCTS operations on them."""

    def __init__(self) -> None:
        self.root = SearchNode(index=0)
        self.nodes: list[SearchNode] = [self.root]

    def add_child(self, parent: SearchNode) -> SearchNode:
        child = SearchNode(index=len(self.nodes), parent=parent)
        parent.children.append(child)
        self.nodes.append(child)
        return child

    def _expandable(self, node: SearchNode) -> bool:
        """A node worth descending into: not a solution (nothing to repair), and not a subtree
        whose every leaf is one."""
        if node.solved:
            return False
        return not node.children or any(self._expandable(child) for child in node.children)

    def select(self, w: float) -> SearchNode | None:
        """From the root, follow the child of highest UCT until a leaf (ties: the older node);
        None when nothing is left to expand."""
        node = self.root
        if not self._expandable(node):
            return None
        while node.children:
            candidates = [child for child in node.children if self._expandable(child)]
            node = max(candidates, key=lambda child: (uct(child, w), -child.index))
        return node

    @staticmethod
    def backpropagate(node: SearchNode, reward: float) -> None:
        """Add one visit with ``reward`` to ``node`` and every ancestor (running mean value)."""
        current: SearchNode | None = node
        while current is not None:
            current.visits += 1
            current.value_sum += reward
            current = current.parent

    def best(self) -> SearchNode | None:
        """The answer: the node with code of highest own score, solved nodes first; ties go to
        the node created first."""
        scored = self.nodes[1:]
        if not scored:
            return None
        return max(scored, key=lambda node: (node.solved, node.score, -node.index))
