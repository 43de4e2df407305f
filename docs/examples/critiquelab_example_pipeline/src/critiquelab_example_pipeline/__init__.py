"""An example critiquelab pipeline in a package of its own: ``plan_first`` (see :mod:`.pipeline`)."""
