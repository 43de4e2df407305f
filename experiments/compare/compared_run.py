"""One child run (pipeline × seed) as a comparison reports it: what compare resolves and what each
of its sections (attribution, controls, learning curves, rescores) reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ComparedRun:
    """One child run (pipeline × seed) in a comparison, with the label it is reported under."""

    run_id: str
    parent_id: str
    experiment_id: str
    label: str
    seed: int
    pipeline: str = ""  # the registered pipeline the run ran (its outcome model summarises its figures)
    control: str = ""  # the positive control the run was (critiquelab.experiments.controls), '' for none
    # What the run warned about when it ended (critiquelab.experiments.run_warnings: replies without code or
    # usage, replies cut at max_tokens …): compare repeats it beside the figures it qualifies.
    warnings: tuple[str, ...] = ()
