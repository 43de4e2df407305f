"""critiquelab for a notebook: the one import no folder of the user's can shadow.

``import critiquelab`` then ``critiquelab.run("experiments/baseline.yaml")``,
``critiquelab.load_study("studies/test_half_baseline")``: the functions of
:mod:`critiquelab.experiments.api` and the types a user holds, re-exported. The packages are the
repository's top-level folders, reached through this package (``critiquelab/core`` is a link to
``../core``), so critiquelab's own imports (``critiquelab.experiments.runner``) never resolve to a
user's ``experiments/`` folder, and the user's own ``import experiments`` still finds theirs.

The names load on first use (PEP 562), not here: every module of ours imports through this
package, so an eager import would load the whole run hub into the sandbox checker and into every
layer below ``experiments`` (against the layering), and cost each of them the hub's import time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as mypy and editors see them; at run time __getattr__ serves them
    from critiquelab.core.errors import UserError
    from critiquelab.eval.results import ProblemResult
    from critiquelab.experiments.api import (
        estimate,
        export,
        list_pipelines,
        load_experiment,
        load_study,
        offline_defaults,
        optimize,
        run,
        write_study,
    )
    from critiquelab.experiments.child_steps import ChildRun
    from critiquelab.experiments.compare.runs import ComparisonResult, compare_runs
    from critiquelab.experiments.costs.estimate import Estimate
    from critiquelab.experiments.rescore.runs import rescore_run
    from critiquelab.experiments.runner import ExperimentResult
    from critiquelab.experiments.spec.experiment import ExperimentSpec
    from critiquelab.experiments.spec.overrides import RunOverrides
    from critiquelab.experiments.studies.read import Study
    from critiquelab.pipelines.outcomes import Outcome
    from critiquelab.pipelines.params import PipelineParams
    from critiquelab.pipelines.registry import create_pipeline, register_pipeline

# name -> the module that defines it: the same list as the imports above (tests/test_namespace.py)
_HOMES = {
    "critiquelab.core.errors": ("UserError",),
    "critiquelab.eval.results": ("ProblemResult",),
    "critiquelab.experiments.api": (
        "estimate", "export", "list_pipelines", "load_experiment", "load_study", "offline_defaults",
        "optimize", "run", "write_study",
    ),
    "critiquelab.experiments.child_steps": ("ChildRun",),
    "critiquelab.experiments.compare.runs": ("ComparisonResult", "compare_runs"),
    "critiquelab.experiments.costs.estimate": ("Estimate",),
    "critiquelab.experiments.rescore.runs": ("rescore_run",),
    "critiquelab.experiments.runner": ("ExperimentResult",),
    "critiquelab.experiments.spec.experiment": ("ExperimentSpec",),
    "critiquelab.experiments.spec.overrides": ("RunOverrides",),
    "critiquelab.experiments.studies.read": ("Study",),
    "critiquelab.pipelines.outcomes": ("Outcome",),
    "critiquelab.pipelines.params": ("PipelineParams",),
    "critiquelab.pipelines.registry": ("create_pipeline", "register_pipeline"),
}

__all__ = [  # a literal, so the type checker reads the imports above as re-exports
    "ChildRun", "ComparisonResult", "Estimate", "ExperimentResult", "ExperimentSpec", "Outcome",
    "PipelineParams", "ProblemResult", "RunOverrides", "Study", "UserError", "compare_runs",
    "create_pipeline", "estimate", "export", "list_pipelines", "load_experiment", "load_study",
    "offline_defaults", "optimize", "register_pipeline", "rescore_run", "run", "write_study",
]


def __getattr__(name: str) -> object:
    """A re-exported name, imported from its home on first use (then cached as an attribute)."""
    for module, names in _HOMES.items():
        if name in names:
            value = getattr(importlib.import_module(module), name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'critiquelab' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
