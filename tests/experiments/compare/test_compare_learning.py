"""Which reference a memory pipeline's slope test is made against."""

from dataclasses import dataclass

from critiquelab.experiments.compare.learning import references


@dataclass(frozen=True)
class Run:
    run_id: str
    label: str
    seed: int
    pipeline: str


def test_the_same_pipeline_without_memory_else_the_baseline_is_the_reference():
    runs = [Run(f"r{i}", label, seed, pipeline) for i, (label, pipeline) in enumerate([
        ("baseline", "baseline"), ("baseline+memory", "baseline"), ("reflexion", "reflexion"),
        ("reflexion+memory", "reflexion"), ("critic_loop+memory", "critic_loop"),
    ]) for seed in (0, 1)]
    with_memory = {"baseline+memory", "reflexion+memory", "critic_loop+memory"}
    assert references(runs, with_memory) == [
        ("baseline+memory", "baseline"), ("critic_loop+memory", "baseline"),
        ("reflexion+memory", "reflexion"),
    ]
    assert references([r for r in runs if r.pipeline != "baseline"], with_memory) == [
        ("reflexion+memory", "reflexion"),
    ]
