"""The single-shot baseline: the coder answers once."""

from __future__ import annotations

import dspy

from critiquelab.pipelines.coder_agent import CoderAgent
from critiquelab.pipelines.params import PipelineParams
from critiquelab.pipelines.registry import register_pipeline
from critiquelab.pipelines.threads import ThreadOutcome, run_thread
from critiquelab.runtime.agents import TaskContext
from critiquelab.runtime.pool.context import current_pool
from critiquelab.signatures.coder import Coder


class BaselineParams(PipelineParams):
    """``baseline`` takes no parameters (any name given is an error)."""


class BaselineOutcome(ThreadOutcome):
    """Figures of ``baseline``: its thread's. Its one version is no draft that a review let through,
    so compare's failure attribution leaves it out."""

    attributed = False


@register_pipeline("baseline", params=BaselineParams, outcome=BaselineOutcome, roles=("coder",))
class Baseline(dspy.Module):
    """The coder answers once; no review. The reference point every other pipeline is compared to.

    It still goes through the pool (task assignment, then the coder's output), so its coder
    calls are traces like any other pipeline's.
    """

    def __init__(self, params: BaselineParams | None = None) -> None:
        super().__init__()
        # a params model is checked when it is made: nothing to validate here
        self.params = params if params is not None else BaselineParams.defaults()
        self.coder = dspy.Predict(Coder)

    def forward(self, prompt: str, entry_point: str = "", task_id: str = "") -> dspy.Prediction:
        ctx = TaskContext(current_pool(), task_id or "task", prompt, entry_point)
        return run_thread(ctx, [CoderAgent(ctx, self.coder)], BaselineOutcome)
