"""Reading a checkpoint store: what a kill leaves is tolerated, what critiquelab never writes is
one clear error (the CLI's exit 2), never a traceback."""

import shutil
from pathlib import Path

import pytest

from critiquelab.core.errors import UserError
from critiquelab.eval.results import ProblemResult, ResolvedParams
from critiquelab.experiments import checkpoints
from critiquelab.experiments.api import load_experiment
from critiquelab.experiments.checkpoints import CheckpointStore
from critiquelab.experiments.serving.provision import resolve_model
from critiquelab.experiments.tracking.run_records import results_digest


def _result(task_id: str, seed: int = 0) -> ProblemResult:
    return ProblemResult(task_id=task_id, pipeline="baseline", seed=seed, status="passed")


def test_a_torn_last_line_is_dropped_and_a_task_recorded_twice_keeps_its_first_record(tmp_path):
    store = CheckpointStore(tmp_path)
    store.append(_result("T/0"))
    first = _result("T/1").model_copy(update={"iterations": 1})
    store.append(first)
    store.append(first.model_copy(update={"iterations": 2}))
    path = tmp_path / "baseline__seed0.jsonl"
    path.write_text(path.read_text() + '{"task_id": "T/2", "pipe')  # killed mid-write

    done = store.load("baseline", 0)

    assert sorted(done) == ["T/0", "T/1"] and done["T/1"].iterations == 1


@pytest.mark.parametrize("damage", ["not utf-8", "a directory"])
def test_a_checkpoint_file_critiquelab_did_not_write_is_one_clear_error(damage, tmp_path):
    path = tmp_path / "baseline__seed0.jsonl"
    if damage == "a directory":
        path.mkdir()
    else:
        path.write_bytes(b"\xff\xfe\x00garbage")

    with pytest.raises(UserError, match=r"cannot read the checkpoint file .*baseline__seed0\.jsonl"):
        CheckpointStore(tmp_path).load("baseline", 0)


def test_all_seeds_are_read_and_a_file_whose_seed_is_not_a_number_is_ignored(tmp_path):
    store = CheckpointStore(tmp_path)
    store.append(_result("T/0", seed=0))
    store.append(_result("T/1", seed=-1))
    (tmp_path / "baseline__seedabc.jsonl").write_text("{}\n")

    loaded = store.load_all("baseline")

    assert sorted((r.task_id, r.seed) for r in loaded) == [("T/0", 0), ("T/1", -1)]


V1_STORE = Path(__file__).parents[1] / "eval" / "data" / "results_v1" / "checkpoints"


def test_a_store_written_before_results_were_versioned_resumes_as_it_was(tmp_path):
    """Checkpoints written by the code of b4cabf8 (no schema version) are reused, and their digest
    is the one that code tagged, so a finished child run of such a data directory is left as it
    was when the experiment is resumed."""
    store_dir = tmp_path / "checkpoints" / "x-key"
    shutil.copytree(V1_STORE, store_dir)
    done = CheckpointStore(store_dir).load("debate", 0)
    assert sorted(done) == ["HumanEval/0", "HumanEval/1"]
    assert done["HumanEval/1"].resolved_params == ResolvedParams(token_budget=1234.5)
    assert CheckpointStore(store_dir).load("debate", 0, ResolvedParams()).keys() == {"HumanEval/0"}
    digest = results_digest([done["HumanEval/0"], done["HumanEval/1"]])
    assert digest == "5e13c5b27c22a12ecd7928c9635c8af1dc13b0692d5bbb15b383fb01c8435b61"  # b4cabf8's


def test_the_checkpoint_key_is_derived_as_before(monkeypatch):
    """The key of a configuration is what b4cabf8 computed for it, given the same code (the code's
    fingerprint is part of every key: any edit of the fingerprinted packages starts a new store)."""
    monkeypatch.setattr(checkpoints, "code_fingerprint", lambda: "fixed-code")
    spec = load_experiment({
        "name": "resume-check", "seeds": [0, 1],
        "pipelines": [{"name": "baseline"}, {"name": "debate", "params": {"debaters": 2, "rounds": 1}}],
        "model": {"id": "openai/fake", "api_base": "http://127.0.0.1:9/v1"},
    })
    fingerprints = checkpoints.input_fingerprints(spec, "sqlite:///unused.db")
    assert checkpoints.checkpoint_key(spec, resolve_model(spec.model), fingerprints) == "7525a8fec5125e30"
