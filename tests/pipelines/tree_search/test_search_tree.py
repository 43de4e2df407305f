"""The tree of tree search on its own: UCT selection, backpropagation, the answer."""

import math

from critiquelab.pipelines.tree_search.tree import SearchTree, uct


def _tree_with_scores(*scores):
    tree = SearchTree()
    children = []
    for score in scores:
        child = tree.add_child(tree.root)
        child.score = score
        tree.backpropagate(child, score)
        children.append(child)
    return tree, children


def test_backpropagation_updates_visits_and_mean_values_up_to_the_root():
    tree, (a, b) = _tree_with_scores(0.5, 0.0)
    grandchild = tree.add_child(a)
    tree.backpropagate(grandchild, 1.0)
    assert (grandchild.visits, a.visits, b.visits, tree.root.visits) == (1, 2, 1, 3)
    assert a.value == 0.75 and b.value == 0.0
    assert math.isclose(tree.root.value, 1.5 / 3)
    assert grandchild.depth == 2 and grandchild.path() == [a, grandchild]


def test_uct_prefers_unvisited_then_value_plus_exploration():
    tree, (a, _) = _tree_with_scores(0.5, 0.2)
    fresh = tree.add_child(tree.root)
    assert uct(fresh, 1.0) == math.inf
    assert math.isclose(uct(a, 1.0), 0.5 + math.sqrt(math.log(2) / 1))
    assert tree.select(1.0) is fresh


def test_selection_descends_by_uct_to_a_leaf_and_exploration_can_overrule_value():
    tree, (a, b) = _tree_with_scores(0.6, 0.5)
    for _ in range(3):  # a's subtree visited often with poor results
        tree.backpropagate(tree.add_child(a), 0.55)
    # a: value (0.6 + 3·0.55)/4 = 0.5625 over 4 visits; b: 0.5 over 1 visit
    assert tree.select(0.0).parent is a  # pure exploitation goes down a to its best leaf
    assert tree.select(2.0) is b  # exploration prefers the rarely visited b


def test_solved_nodes_are_not_expanded_and_the_answer_prefers_them():
    tree, (a, b) = _tree_with_scores(0.9, 0.5)
    b.solved = True
    assert tree.select(0.0) is a
    assert tree.best() is b  # solved beats a higher score that fails a visible example
    a.solved = True
    assert tree.select(1.0) is None  # nothing left to repair
    assert tree.best() is a  # among solved: the higher score


def test_best_breaks_ties_by_creation_order_and_empty_tree_has_none():
    assert SearchTree().best() is None
    tree, (a, _) = _tree_with_scores(0.5, 0.5)
    assert tree.best() is a
