"""critiquelab rescore (issue #31): a finished run's final programs scored on a stronger test file
for the same task ids, in the sandbox, with no model anywhere; and compare showing what was lost.

The scripted run answers five problems against weak tests; the stronger file (EvalPlus format)
has four of them (R/4 missing) and one the run never saw (R/9):

| task | answer | weak test | stronger tests |
|---|---|---|---|
| R/0 | right | passes | passes |
| R/1 | `return x` for \\|x\\| | passes (only a positive input) | fails: lost |
| R/2 | `return None` | fails | fails |
| R/3 | right | fails (the weak test is wrong) | passes: gained |
| R/4 | right | passes | not in the file: named as missing |
"""

from __future__ import annotations

import socket

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.rescore_tasks import prompt_of, write_datasets, write_rows
from support.specs import fake_spec

from critiquelab.core.errors import UserError
from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.compare.runs import compare_runs
from critiquelab.experiments.rescore.pairs import LOST_PASSES_HEADING, RESCORED_FROM_TAG
from critiquelab.experiments.rescore.runs import rescore_run
from critiquelab.experiments.tracking.store import PARENT_TAG, tracking_uri


@pytest.fixture
def datasets(tmp_path):
    """(weak humaneval-format file, stronger evalplus-format file, the run's scripted answers)."""
    return write_datasets(tmp_path)


@pytest.fixture
def finished_run(datasets, home):
    """The original experiment on the weak tests: baseline and a 2-sample vote, under one parent."""
    weak, _, answers = datasets
    pipelines = [{"name": "baseline"}, {"name": "vote", "params": {"k": 2}}]
    with FakeOpenAIServer(humaneval_responder(answers)) as fake:
        spec = fake_spec(fake.api_base, pipelines=pipelines, limit=None, pool={"persist": False})
        spec["dataset"] = {"source": weak, "format": "humaneval"}
        return run(spec, progress=False, compare=False)


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt from this process fails the test: no model endpoint is contacted."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _runs_in(home, experiment_id):
    return MlflowClient(tracking_uri(home)).search_runs([experiment_id], max_results=1000)


def test_rescoring_a_parent_counts_lost_and_gained_with_no_model(finished_run, datasets, home, no_network):
    _, strong, _ = datasets
    original_children = {c.pipeline: c.run_id for c in finished_run.children}
    result = rescore_run(finished_run.parent_run_id, strong, dataset_format="evalplus", home=home)

    assert [r.label for r in result.runs] == ["baseline+rescored", "vote+rescored"]
    for rescored in result.runs:
        change = rescored.change
        assert (change.problems, change.passed_before, change.passed_after) == (4, 2, 2)
        assert change.lost == ["R/1"] and change.gained == ["R/3"]
        assert change.pass_at_1_before == change.pass_at_1_after == 0.5
    assert result.missing == ["R/4"]
    assert result.notices[0] == (f"1 of 5 task ids of run {finished_run.parent_run_id} are not in dataset "
                                 f"'{strong}' and were left out: R/4")
    assert "extra.samples_passed" in result.notices[1] and "final programs only" in result.notices[1]

    client = MlflowClient(tracking_uri(home))
    parent = client.get_run(result.run_id)
    assert parent.info.experiment_id == client.get_run(finished_run.parent_run_id).info.experiment_id
    assert parent.data.tags[RESCORED_FROM_TAG] == finished_run.parent_run_id
    assert parent.data.params["dataset.format"] == "evalplus"
    assert len(parent.data.params["dataset.fingerprint"]) == 64  # the file's SHA-256
    assert parent.info.status == "FINISHED"
    for rescored in result.runs:
        child = client.get_run(rescored.run_id)
        label = child.data.params["rescore.original_label"]
        assert child.data.tags[RESCORED_FROM_TAG] == original_children[label] == rescored.original_run_id
        assert child.data.tags[PARENT_TAG] == result.run_id
        assert child.data.metrics["rescore.lost"] == 1 and child.data.metrics["pass_at_1"] == 0.5
        table = pd.read_parquet(client.download_artifacts(rescored.run_id, "problems.parquet", str(home)))
        outcome = dict(zip(table["task_id"], table["passed"], strict=True))
        assert outcome == {"R/0": True, "R/1": False, "R/2": False, "R/3": True}
        # old-test flags of code the table never kept
        assert "extra.samples_passed" not in table and "extra.first_passed" not in table
        assert table.loc[table["task_id"] == "R/1", "detail"].item().startswith("hidden input 2 of 2")
    assert (result.out_dir / "summary.md").is_file()
    changes = pd.read_csv(result.out_dir / "changes.csv")
    lost = changes[changes["passed_before"] & ~changes["passed_after"]]
    assert len(changes) == 8 and list(lost["task_id"]) == ["R/1", "R/1"]


def test_rescoring_on_the_runs_own_tests_changes_nothing(finished_run, datasets, home):
    weak, _, _ = datasets
    result = rescore_run(finished_run.children[0].run_id, weak, home=home)
    (rescored,) = result.runs
    assert rescored.change.lost == rescored.change.gained == [] and rescored.change.passed_after == 3
    assert result.missing == [] and result.dataset_format == "humaneval"


def test_cli_rescores_a_pipeline_run_and_compare_shows_the_lost_passes(finished_run, datasets, home, capsys,
                                                                       tmp_path, no_network):
    _, strong, _ = datasets
    baseline = finished_run.children[0].run_id
    out = tmp_path / "rescore-out"
    assert main(["--home", str(home), "rescore", baseline, "--dataset", strong, "--format", "evalplus",
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    (note,) = captured.err.strip().splitlines()
    assert note.startswith("critiquelab: note: 1 of 5 task ids") and note.endswith("left out: R/4")
    assert "| baseline | 0 | 4 | 2 | 2 | 1 | 1 | 0.5000 | 0.5000 | R/1 |" in captured.out
    rescored_id = next(line.split()[2] for line in captured.out.splitlines() if line.startswith("MLflow run"))
    assert (out / "summary.md").read_text().count("| baseline | 0 | 4 |") == 1

    both = compare_runs([baseline, rescored_id], home=home, n_resamples=199, log=False)
    assert f"## {LOST_PASSES_HEADING}" in both.markdown
    assert "| baseline → baseline+rescored | 0 | 4 | 2 | 2 | 1 | 1 | 0.5000 | 0.5000 | R/1 |" in both.markdown
    assert LOST_PASSES_HEADING in both.files["html"].read_text() and both.files["lost_passes"].is_file()
    alone = compare_runs(finished_run.parent_run_id, home=home, n_resamples=199, log=False)
    assert LOST_PASSES_HEADING not in alone.markdown and "lost_passes" not in alone.files


def test_a_file_with_no_matching_task_id_is_one_line_exit_2_and_no_run(finished_run, home, tmp_path, capsys,
                                                                       no_network):
    other = write_rows(tmp_path / "other.jsonl", [{
        "task_id": "Other/0", "prompt": prompt_of("square", "x * x"), "entry_point": "square",
        "canonical_solution": "    return x * x\n", "base_input": [[2]]}])
    before = len(_runs_in(home, finished_run.experiment_id))
    out = tmp_path / "never"
    assert main(["--home", str(home), "rescore", finished_run.parent_run_id, "--dataset", other,
                 "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"critiquelab: error: dataset '{other}' has none of the 5 task ids of run "
                           f"{finished_run.parent_run_id} (e.g. R/0, R/1, R/2 (+2 more))")
    assert len(_runs_in(home, finished_run.experiment_id)) == before and not out.exists()
    with pytest.raises(UserError, match="unknown run id"):
        rescore_run("0123456789abcdef", other, home=home)


@pytest.mark.parametrize("how", ["checked first", "gone read-only after the check"])
def test_an_out_that_cannot_be_created_is_one_line_and_leaves_no_run(how, finished_run, datasets, home,
                                                                     tmp_path, capsys, monkeypatch):
    """Both through the API (no argparse in front) and when the directory was fine at the check
    but cannot be made by the time the files are written: no `…+rescored` run is left RUNNING."""
    _, strong, _ = datasets
    before = len(_runs_in(home, finished_run.experiment_id))
    out = tmp_path / "reports" / "rescore"
    if how == "checked first":
        monkeypatch.setattr("critiquelab.experiments.paths.tempfile.mkdtemp", _refused)
    else:
        def fine_then_blocked(path, what):
            (tmp_path / "reports").write_text("a file where the directory would be")
            return path

        monkeypatch.setattr("critiquelab.experiments.rescore.runs.check_writable_dir", fine_then_blocked)
    with pytest.raises(UserError, match="where the rescore's files would go"):
        rescore_run(finished_run.parent_run_id, strong, dataset_format="evalplus", home=home, out=out)
    assert len(_runs_in(home, finished_run.experiment_id)) == before


def _refused(*args, **kwargs):
    raise PermissionError(13, "Permission denied")
