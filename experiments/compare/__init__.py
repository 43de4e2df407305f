"""Comparing runs: the per-pipeline table and paired statistics (:mod:`.runs`), a compared run
read back (:mod:`.compared_run`), and the comparison's views by concern: failure attribution,
positive controls, learning curves, model cost."""
