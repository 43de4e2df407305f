"""``critiquelab optimize``: the optimisation spec (:mod:`experiments.optimize.spec`) and the loop
of typed steps split → baseline val → compile → compiled val → gate → held-out test
(:mod:`experiments.optimize.loop`)."""
