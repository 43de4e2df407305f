"""Experiments: the run hub — specs (:mod:`experiments.spec`), the runner and what it drives
(serving, tracking, executors, optimisation), comparisons, the viewer and the CLI.

The library API lives in :mod:`experiments.api`; the CLI in :mod:`experiments.cli` is a thin
layer over it. Nothing heavy is imported here.
"""
