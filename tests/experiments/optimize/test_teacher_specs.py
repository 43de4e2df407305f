"""The issue #36 optimisation specs say what they claim: each is valid as shipped, optimises the
pipeline it names with the 1.5B as teacher, and judges on at least 60 held-out problems that
train and validation never saw."""

from pathlib import Path

import pytest
import yaml

from critiquelab.eval.datasets import load_problems
from critiquelab.experiments.optimize.spec import check_spec, load_optimize_spec
from critiquelab.experiments.spec.experiment import parse_spec
from critiquelab.optimizers.splits import make_split

SPECS = {"optimize_teacher_baseline": ("baseline", "mipro"),
         "optimize_teacher_sampler": ("vote", "bootstrap"),
         "optimize_gepa_repairer": ("tree_search", "gepa")}


@pytest.mark.parametrize("name", SPECS)
def test_a_teacher_spec_is_valid_and_holds_out_the_test_half(name):
    spec = load_optimize_spec(Path(f"experiments/{name}.yaml"))
    check_spec(spec)  # the pipeline builds, its roles exist, the bundled models are named
    assert (spec.pipeline.name, spec.optimizer.name) == SPECS[name]
    assert spec.teacher is not None and spec.teacher.id == "local-1.5b" and spec.model.id == "local"
    assert spec.optimizer.params.model_fields_set  # the budget is written down, not DSPy's default
    dev = [p.task_id for p in load_problems(split=spec.dataset.split)]
    held_out = [p.task_id for p in load_problems(split="test")]
    split = make_split(dev, spec.split, test_ids=held_out)
    assert len(split.test) >= 60 and not set(split.test) & (set(split.train) | set(split.val))
    split.check_scoring(split.test)


def test_the_sampler_is_the_best_selection_pipeline_and_the_repairer_is_tree_searchs():
    selection = parse_spec(yaml.safe_load(Path("experiments/visible_selection.yaml").read_text()))
    greedy_filter10 = next(p for p in selection.pipelines if p.display_name == "greedy_filter10")
    sampler = load_optimize_spec(Path("experiments/optimize_teacher_sampler.yaml"))
    assert sampler.pipeline.params == greedy_filter10.params and sampler.optimizer.roles == ["coder"]
    assert (sampler.model.temperature, sampler.model.max_tokens) == (0.0, 1024)
    searched = load_optimize_spec(Path("experiments/optimize_tree_search.yaml"))
    repairer = load_optimize_spec(Path("experiments/optimize_gepa_repairer.yaml"))
    assert repairer.pipeline.params == searched.pipeline.params and repairer.optimizer.roles == ["repairer"]
