"""``tree_search`` (LATS): UCT over a tree of programs (:mod:`critiquelab.pipelines.tree_search.tree`),
expanded by pool agents (:mod:`critiquelab.pipelines.tree_search.agents`)."""
