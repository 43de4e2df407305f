"""Memory attached to whichever pipeline a spec names: the wrapper that runs a task with memory
(:mod:`.task_hook`), the figures it adds to the pipeline's outcome (:mod:`.outcome`) and the run
metrics drawn from them (:mod:`.metrics`). Here, not in :mod:`critiquelab.runtime.memory`, because they build
on the pipelines' outcome contract (:mod:`critiquelab.pipelines.outcomes`)."""
