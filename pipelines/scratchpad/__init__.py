"""``scratchpad``: analyst, coder, tester and reviewer working on one shared scratchpad (the
subsystem :mod:`critiquelab.runtime.scratchpad`)."""
