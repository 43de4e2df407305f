"""Tree search's tree as a panel: an inline SVG (a node per program state, coloured by its pass
rate on the visible examples, else its value; edges parent → child; the chosen node ringed) and
a table of every node's statistics with the reflection written on its path.

The tree comes from the searcher's verdict, which carries every node's statistics; a search that
ended before its verdict is rebuilt from its node messages (each ``proposal`` names its parent
node), with the statistics only a finished search has left empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from critiquelab.runtime.pool.messages import Intent, Message

_SPACING_X, _SPACING_Y, _RADIUS, _MARGIN = 46, 60, 14, 24
# Longest reflection shown in the table (the full text is in the message list).
_REFLECTION_CHARS = 160


@dataclass
class TreeNode:
    """One node as the panel shows it; statistics are None where the messages do not say."""

    node: int
    parent: int | None
    depth: int
    value: float | None = None
    visits: int | None = None
    pass_rate: float | None = None
    solved: bool = False
    reflection: str = ""
    children: list[int] = field(default_factory=list)


def _nodes_from_messages(messages: Sequence[Message]) -> tuple[dict[int, TreeNode], int | None]:
    """The tree and the chosen node: from the last verdict with a tree, else from node messages."""
    verdicts = [m for m in messages if m.intent == Intent.VERDICT and "tree" in m.metadata]
    verdict = verdicts[-1] if verdicts else None
    nodes: dict[int, TreeNode] = {}
    if verdict is not None:
        for row in verdict.metadata["tree"]:
            nodes[int(row["node"])] = TreeNode(
                node=int(row["node"]), parent=row["parent"], depth=int(row["depth"]),
                value=float(row["value"]), visits=int(row["visits"]), pass_rate=row["pass_rate"],
                solved=bool(row["solved"]),
            )
        chosen = verdict.metadata.get("chosen")
    else:
        proposals = [m for m in messages if m.intent == Intent.PROPOSAL and "parent_node" in m.metadata]
        if proposals:
            nodes[0] = TreeNode(node=0, parent=None, depth=0)
        for message in proposals:
            meta = message.metadata
            nodes[int(meta["node"])] = TreeNode(node=int(meta["node"]), parent=int(meta["parent_node"]),
                                                depth=int(meta["depth"]))
        for message in messages:
            node = nodes.get(message.metadata.get("node", -1))
            if message.intent == Intent.EXECUTION_FEEDBACK and node is not None:
                node.pass_rate = message.metadata.get("pass_rate")
                node.solved = bool(message.metadata.get("solved"))
        chosen = None
    for message in messages:
        node = nodes.get(message.metadata.get("node", -1))
        if message.intent == Intent.REFLECTION and node is not None:
            node.reflection = message.content.strip()
    for tree_node in nodes.values():
        if tree_node.parent in nodes:
            nodes[tree_node.parent].children.append(tree_node.node)
    return nodes, None if chosen is None else int(chosen)


def _layout(nodes: dict[int, TreeNode]) -> dict[int, tuple[float, float]]:
    """Leaves side by side in depth-first order, each parent centred over its children."""
    places: dict[int, tuple[float, float]] = {}
    next_leaf = 0

    def place(index: int) -> float:
        nonlocal next_leaf
        node = nodes[index]
        if node.children:
            xs = [place(child) for child in node.children]
            x = (xs[0] + xs[-1]) / 2
        else:
            x = _MARGIN + next_leaf * _SPACING_X
            next_leaf += 1
        places[index] = (x, _MARGIN + node.depth * _SPACING_Y)
        return x

    for root in (n for n in nodes.values() if n.parent not in nodes):
        place(root.node)
    return places


def _colour(node: TreeNode) -> str:
    """Red (0) to green (1) by visible pass rate, else value; grey when neither is known."""
    measure = node.pass_rate if node.pass_rate is not None else node.value if node.visits else None
    if measure is None:
        return "#bbb"
    return f"hsl({round(120 * max(0.0, min(1.0, float(measure))))},60%,55%)"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _svg(nodes: dict[int, TreeNode], chosen: int | None) -> str:
    places = _layout(nodes)
    width = max(x for x, _ in places.values()) + _MARGIN
    height = max(y for _, y in places.values()) + _MARGIN
    parts = [f'<svg class="search-tree" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
             f'height="{height:.0f}" xmlns="http://www.w3.org/2000/svg">']
    for node in nodes.values():
        if node.parent in places:
            (x1, y1), (x2, y2) = places[node.parent], places[node.node]
            parts.append(f'<line class="search-edge" x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" '
                         'stroke="#999"/>')
    for node in nodes.values():
        x, y = places[node.node]
        mark = " chosen" if node.node == chosen else ""
        stroke = 'stroke="#000" stroke-width="3"' if mark else 'stroke="#555" stroke-width="1"'
        title = (f"node {node.node} · depth {node.depth} · pass rate {_rate(node.pass_rate)} · "
                 f"value {_rate(node.value)}" + (" · chosen" if mark else ""))
        parts.append(f'<g class="search-node{mark}" data-node="{node.node}">'
                     f'<circle cx="{x:.0f}" cy="{y:.0f}" '
                     f'r="{_RADIUS}" fill="{_colour(node)}" {stroke}><title>{escape(title)}</title></circle>'
                     f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle">{node.node}</text></g>')
    return "".join(parts) + "</svg>"


def _table(nodes: dict[int, TreeNode], chosen: int | None) -> str:
    rows = "".join(
        f'<tr class="search-row{" chosen" if node.node == chosen else ""}" data-node="{node.node}">'
        f"<td>{node.node}{' (chosen)' if node.node == chosen else ''}</td>"
        f"<td>{'–' if node.parent is None else node.parent}</td><td>{node.depth}</td>"
        f"<td>{'–' if node.value is None else f'{node.value:.2f}'}</td>"
        f"<td>{'–' if node.visits is None else node.visits}</td>"
        f"<td>{_rate(node.pass_rate)}{' solved' if node.solved else ''}</td>"
        f"<td>{escape(node.reflection[:_REFLECTION_CHARS])}</td></tr>"
        for node in sorted(nodes.values(), key=lambda n: n.node)
    )
    return ('<table class="search-nodes"><tr><th>node</th><th>parent</th><th>depth</th><th>value</th>'
            f"<th>visits</th><th>visible pass rate</th><th>reflection</th></tr>{rows}</table>")


def search_tree_panel(messages: Sequence[Message]) -> str:
    """The search tree as an SVG and a table; empty if the problem has no tree-search nodes."""
    nodes, chosen = _nodes_from_messages(messages)
    if not nodes:
        return ""
    return (f'<section class="panel search"><h2>Search tree</h2>{_svg(nodes, chosen)}'
            f"{_table(nodes, chosen)}</section>")
