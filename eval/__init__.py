"""Evaluation: datasets, code assembly, sandboxed execution, metrics.

Nothing heavy is imported here; import the submodule you need.
"""
