"""What the runner does for a pipeline with ``memory:`` on, and the problem order of a run.

Kept apart from the runner so it stays the hub that calls things: open the memory bank, give
the pipeline's roles the memory field and wrap it
(:class:`critiquelab.pipelines.with_memory.task_hook.WithMemory`), check a warm start against the optimisers'
split rule, and compute the run's memory metrics.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from critiquelab.core.errors import UserError
from critiquelab.eval.problems import Problem
from critiquelab.eval.results import ProblemResult
from critiquelab.experiments.spec.experiment import ExperimentSpec
from critiquelab.experiments.spec.pipeline_spec import PipelineSpec
from critiquelab.optimizers.splits import Split, SplitOverlapError
from critiquelab.pipelines.with_memory.metrics import error_blocks, recall_quality, reuse, size
from critiquelab.pipelines.with_memory.task_hook import WithMemory
from critiquelab.runtime.memory.bank import MemoryBank, memory_dir
from critiquelab.runtime.memory.config import MemoryConfig
from critiquelab.runtime.memory.consolidation import consolidate
from critiquelab.runtime.memory.episodic import served_task_ids, stored_task_ids
from critiquelab.runtime.memory.injection import RunMemory, enable_memory

ERROR_BLOCK = 10  # problems per block when failure reasons are counted over the run's order


def memory_of(pipeline_spec: PipelineSpec) -> MemoryConfig | None:
    """The pipeline's memory config when memory is on."""
    config = pipeline_spec.memory
    return config if config is not None and config.enabled else None


def run_order(problems: list[Problem], order_seed: int | None, seed: int) -> list[Problem]:
    """Problems in the order a pipeline × seed run solves them: as given, or shuffled by
    ``order_seed`` and the run's seed (each seed its own reproducible ordering)."""
    if order_seed is None:
        return list(problems)
    ordered = list(problems)
    random.Random(f"{order_seed}:{seed}").shuffle(ordered)
    return ordered


def check_warm_starts(spec: ExperimentSpec, problems: list[Problem], home: Path) -> None:
    """A memory warm-started from a run must not be scored on the problems that run learned on
    (the optimisers' split rule), unless ``allow_overlap``."""
    for pipeline_spec in spec.pipelines:
        config = memory_of(pipeline_spec)
        if config is None or config.warm_start is None:
            continue
        if not (memory_dir(home) / "chroma").exists() and not spec.pool.chroma_url:
            raise UserError(f"pipeline '{pipeline_spec.display_name}': memory.warm_start: this data "
                            "directory holds no memory")
        # Read without opening the store for writing: a refused run leaves it as it was.
        if spec.pool.chroma_url:
            learned = served_task_ids(spec.pool.chroma_url, config.store, config.warm_start)
        else:
            learned = stored_task_ids(memory_dir(home) / "chroma", config.store, config.warm_start)
        if not learned:
            raise UserError(f"pipeline '{pipeline_spec.display_name}': memory.warm_start: run "
                            f"'{config.warm_start}' wrote no memory in store '{config.store}'")
        try:
            Split(0, tuple(sorted(learned)), (), ()).check_scoring(
                [p.task_id for p in problems], allow_overlap=config.allow_overlap
            )
        except SplitOverlapError as exc:
            raise UserError(f"pipeline '{pipeline_spec.display_name}': memory.warm_start: "
                            f"{str(exc).replace('optimise the program', 'build that memory')}") from exc


def open_bank(home: Path, config: MemoryConfig, chroma_url: str | None) -> MemoryBank:
    return MemoryBank(home, collection=config.store, chroma_url=chroma_url)


def with_memory(pipeline: Any, bank: MemoryBank, config: MemoryConfig, run_id: str) -> WithMemory:
    # Without lessons no role gets the `memories` field: its calls differ from a run without
    # memory by the demos alone.
    enable_memory(pipeline, config.roles if config.lessons else [])
    return WithMemory(pipeline, RunMemory(bank, config, run_id))


def memory_metrics(
    bank: MemoryBank, config: MemoryConfig, run_id: str, results: list[ProblemResult]
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The run's memory metrics (consolidating first when the config asks) and its failures per
    block of problems in run order."""
    metrics: dict[str, float] = {}
    if config.consolidate:
        report = consolidate(bank.episodic)
        metrics.update({"memory.consolidation.merged": report.merged,
                        "memory.consolidation.redundancy_before": report.redundancy_before})
    blocks = error_blocks(results, ERROR_BLOCK)
    metrics.update(reuse(results))
    metrics.update(recall_quality(bank.episodic, run_id, config.k))
    metrics.update(size(bank.episodic, run_id))
    if len(blocks) > 1:
        metrics["memory.fail_rate_first_block"] = blocks[0]["fail_rate"]
        metrics["memory.fail_rate_last_block"] = blocks[-1]["fail_rate"]
    return metrics, blocks
