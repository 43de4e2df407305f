"""Experiments: specs, the runner (MLflow), LM provisioning, the CLI.

The library API lives in :mod:`experiments.api`; the CLI in :mod:`experiments.cli` is a thin
layer over it. Nothing heavy is imported here.
"""
