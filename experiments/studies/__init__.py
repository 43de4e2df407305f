"""Studies: the committed unit of a reported result.

A study is a folder of plain files — the spec as run, every arm's per-problem outcomes with the
final programs, the recorded runs (params, metrics, tags), compare's summary and a manifest
with checksums — from which a reader re-computes the tables, paired tests and rescores without
the data directory. :mod:`critiquelab.experiments.studies.files` defines the format,
:mod:`critiquelab.experiments.studies.write` makes one from a finished run and
:mod:`critiquelab.experiments.studies.read` loads, checks and re-analyses one.
"""
