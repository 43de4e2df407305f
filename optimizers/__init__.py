"""Prompt optimisation from pool traces: collection, splits, DSPy compilation, TextGrad
refinement and export. Submodules import their heavy dependencies lazily."""
