"""``tree_search`` (LATS): UCT over a tree of programs (:mod:`pipelines.tree_search.tree`), expanded
by pool agents (:mod:`pipelines.tree_search.agents`)."""
