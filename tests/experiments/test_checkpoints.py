"""Reading a checkpoint store: what a kill leaves is tolerated, what critiquelab never writes is
one clear error (the CLI's exit 2), never a traceback."""

import pytest

from core.errors import UserError
from eval.results import ProblemResult
from experiments.checkpoints import CheckpointStore


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
