"""Rescoring stored runs against other tests without calling a model again (:mod:`.runs`), and
the pairs of runs a rescore compares (:mod:`.pairs`)."""
