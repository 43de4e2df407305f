"""Pipelines: ``dspy.Module``s that compose roles, registered by name.

Importing this package registers nothing: :mod:`critiquelab.pipelines.registry` loads the built-in
pipelines lazily the first time a name is looked up.
"""
