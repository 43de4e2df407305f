"""``critiquelab optimize``: the optimisation spec (:mod:`critiquelab.experiments.optimize.spec`) and the loop
of typed steps split → baseline val → compile → compiled val → gate → held-out test
(:mod:`critiquelab.experiments.optimize.loop`)."""
