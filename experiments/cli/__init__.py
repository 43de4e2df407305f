"""The ``critiquelab`` command line, a thin layer over :mod:`critiquelab.experiments.api`: the entry point and
how a command ends (:mod:`.main`), the verbs and their options (:mod:`.parser`), what each verb
does (:mod:`.commands`)."""
