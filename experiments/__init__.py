"""Experiments: the run hub — specs (:mod:`critiquelab.experiments.spec`), the runner and what it drives
(serving, tracking, executors, optimisation), comparisons, the viewer and the CLI.

The library API lives in :mod:`critiquelab.experiments.api`; the CLI in :mod:`critiquelab.experiments.cli` is
a thin layer over it. Nothing heavy is imported here.
"""
