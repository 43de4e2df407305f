"""Studies (issue #55): a finished run written as committed files, from which compare, rescore and a
DataFrame work with no data directory; and every broken study refused in one line, exit 2.

The scripted run is test_rescore's: baseline and a 2-sample vote on five tasks with weak tests
(tests/support/rescore_tasks.py), 3 of 5 passing for each arm."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from support.fake_openai import FakeOpenAIServer, humaneval_responder
from support.rescore_tasks import write_datasets
from support.specs import fake_spec

from critiquelab.core.errors import UserError
from critiquelab.experiments import api
from critiquelab.experiments.api import run
from critiquelab.experiments.cli.main import main
from critiquelab.experiments.compare.runs import compare_runs
from critiquelab.experiments.rescore.runs import rescore_study
from critiquelab.experiments.studies.files import MANIFEST, OUTCOMES, RUNS, SPEC
from critiquelab.experiments.studies.read import file_sha256, load_study
from critiquelab.experiments.studies.write import write_study


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    return write_datasets(tmp_path_factory.mktemp("data"))


def _spec(api_base, weak):
    spec = fake_spec(api_base, pipelines=[{"name": "baseline"}, {"name": "vote", "params": {"k": 2}}],
                     limit=None, pool={"persist": False})
    spec["dataset"] = {"source": weak, "format": "humaneval"}
    return spec


@pytest.fixture(scope="module")
def run_home(tmp_path_factory):
    """The data directory of the one scripted run every test here reads (module scope: a run takes
    seconds; the tests that change a study change a copy)."""
    return tmp_path_factory.mktemp("run") / "home"


@pytest.fixture(scope="module")
def finished_run(datasets, run_home):
    weak, _, answers = datasets
    with FakeOpenAIServer(humaneval_responder(answers)) as fake:
        return run(_spec(fake.api_base, weak), home=run_home, progress=False, compare=False)


@pytest.fixture(scope="module")
def written(finished_run, run_home, tmp_path_factory):
    return write_study(finished_run.parent_run_id, tmp_path_factory.mktemp("studies") / "weak_tests",
                       evidence="held_out", tuned_on="nothing", notes=["scripted answers"], home=run_home)


@pytest.fixture
def study(written, tmp_path):
    """A copy of the written study, this test's to change."""
    return shutil.copytree(written, tmp_path / "weak_tests")


def test_a_study_holds_the_run_as_plain_files(study, finished_run):
    manifest = json.loads((study / MANIFEST).read_text())
    assert manifest["schema"] == "critiquelab.study/1" and manifest["name"] == "weak_tests"
    assert manifest["evidence"] == "held_out" and manifest["notes"] == ["scripted answers"]
    assert manifest["parent_run_ids"] == [finished_run.parent_run_id]
    assert set(manifest["run_ids"]) == {"baseline/seed=0", "vote/seed=0"}
    assert sorted(manifest["run_ids"].values()) == sorted(c.run_id for c in finished_run.children)
    assert manifest["model_sha256"] == {"openai/fake": "n/a"} and "dspy" in manifest["versions"]
    assert manifest["dataset"] == {"source": manifest["dataset"]["source"], "split": "all", "problems": 5}
    assert len(manifest["git_commit"]) >= 40
    assert manifest["lm_calls"] == sum(c.metrics["lm_calls"] for c in finished_run.children) > 0
    for name in (SPEC, OUTCOMES, RUNS, "summary.md"):
        assert manifest["files"][name] == file_sha256(study / name)
    lines = [json.loads(line) for line in (study / OUTCOMES).read_text().splitlines()]
    assert len(lines) == 10 and [line["arm"] for line in lines[:1]] == ["baseline"]
    r1 = next(line for line in lines if line["arm"] == "baseline" and line["task_id"] == "R/1")
    assert r1["passed"] is True and "return x" in r1["final_code"]
    tokens = r1["prompt_tokens"] + r1["completion_tokens"]
    assert r1["tokens_by_model"] == {"openai/fake": tokens} and tokens > 0
    assert "pipelines" in (study / SPEC).read_text()


def test_compare_of_a_study_needs_no_data_directory_and_matches_the_live_one(study, finished_run, run_home,
                                                                              home):
    live = compare_runs(finished_run.parent_run_id, home=run_home, log=False)
    assert not home.exists()  # this test's data directory ($CRITIQUELAB_HOME): nothing is read from it
    loaded = load_study(study)
    again = loaded.compare()
    assert again.markdown == (study / "summary.md").read_text()
    assert list(again.table["pass@1"]) == list(live.table["pass@1"]) == [0.6, 0.6]
    assert list(again.pairs["mcnemar_p"]) == list(live.pairs["mcnemar_p"])
    assert "held out" in again.markdown  # the study's evidence status travels with its figures
    frame = api.load_study(study).outcomes  # the notebook's way in
    assert {"arm", "seed", "task_id", "passed", "final_code", "tokens_by_model"} <= set(frame.columns)
    assert frame.groupby("arm")["passed"].sum().to_dict() == {"baseline": 3, "vote": 3}


def test_rescoring_a_study_reads_its_files_alone(study, datasets, home, tmp_path):
    _, strong, _ = datasets
    result = rescore_study(study, strong, dataset_format="evalplus", out=tmp_path / "rescored")
    for change in result.changes:
        assert (change.lost, change.gained) == (["R/1"], ["R/3"])
    assert result.missing == ["R/4"] and (tmp_path / "rescored" / "changes.csv").is_file()
    load_study(study)  # the study folder itself was not written
    assert not home.exists()


def test_the_cli_writes_checks_compares_and_rescores_a_study(finished_run, datasets, run_home, tmp_path,
                                                              capsys):
    home = run_home
    folder = tmp_path / "s"
    assert main(["--home", str(home), "study", "write", finished_run.parent_run_id, "--out", str(folder),
                 "--evidence", "in_sample", "--tuned-on", "these five tasks"]) == 0
    assert main(["study", "check", str(folder)]) == 0
    assert "in-sample" in capsys.readouterr().out
    assert main(["--home", str(home), "compare", str(folder), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "tuned on: these five tasks" in out and (tmp_path / "report" / "report.html").is_file()
    assert main(["--home", str(home), "rescore", str(folder), "--dataset", datasets[1],
                 "--format", "evalplus", "--out", str(tmp_path / "r")]) == 0
    assert "R/1" in (tmp_path / "r" / "summary.md").read_text()


def test_run_with_study_writes_it_when_the_run_ends(datasets, home, tmp_path, capsys):
    weak, _, answers = datasets
    spec_file = tmp_path / "spec.json"
    with FakeOpenAIServer(humaneval_responder(answers)) as fake:
        spec_file.write_text(json.dumps(_spec(fake.api_base, weak)))
        code = main(["--home", str(home), "run", str(spec_file), "--no-progress", "--study",
                     str(tmp_path / "st"), "--evidence", "held_out"])
    assert code == 0 and load_study(tmp_path / "st").manifest.evidence == "held_out"


def _rewrite(folder, name, text):
    """Change a file and make the manifest's checksum agree, so the next check down is reached."""
    (folder / name).write_text(text)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["files"][name] = file_sha256(folder / name)
    (folder / MANIFEST).write_text(json.dumps(manifest))


def _drop_passed(folder):
    lines = [json.loads(line) for line in (folder / OUTCOMES).read_text().splitlines()]
    del lines[3]["passed"]
    _rewrite(folder, OUTCOMES, "".join(json.dumps(line) + "\n" for line in lines))


def _listed_arm(folder):
    lines = [json.loads(line) for line in (folder / OUTCOMES).read_text().splitlines()]
    lines[2]["arm"] = ["baseline"]
    _rewrite(folder, OUTCOMES, "".join(json.dumps(line) + "\n" for line in lines))


def _twice(folder):
    lines = (folder / OUTCOMES).read_text().splitlines()
    _rewrite(folder, OUTCOMES, "\n".join([*lines, lines[0]]) + "\n")


def _unfinished(folder):
    runs = json.loads((folder / RUNS).read_text())
    runs[1]["status"] = "RUNNING"
    _rewrite(folder, RUNS, json.dumps(runs))


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda f: (f / SPEC).unlink(), "spec.yaml is missing"),
    (lambda f: (f / OUTCOMES).write_text((f / OUTCOMES).read_text().replace("R/1", "R/7")),
     "outcomes.jsonl does not match its SHA-256"),
    (lambda f: (f / MANIFEST).write_text('{"schema": "critiquelab.study/9"}'), "is not critiquelab.study/1"),
    (lambda f: (f / MANIFEST).unlink(), "not a study folder"),
    (_drop_passed, "line 4 has no 'passed' column"),
    (_twice, "appears twice for arm baseline seed 0"),
    (_listed_arm, "line 3: 'arm' is not a str"),
    (_unfinished, "had not finished (RUNNING)"),
])
def test_a_broken_study_is_one_line_exit_2(study, damage, expected, capsys):
    damage(study)
    with pytest.raises(UserError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_study(study)
    assert main(["study", "check", str(study)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert expected in line


def test_a_study_of_an_unfinished_run_is_refused_and_nothing_written(finished_run, run_home, tmp_path,
                                                                      capsys):
    from mlflow.tracking import MlflowClient

    from critiquelab.experiments.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri(run_home))
    client.set_terminated(finished_run.parent_run_id, "RUNNING")
    try:
        folder = tmp_path / "never"
        assert main(["--home", str(run_home), "study", "write", finished_run.parent_run_id,
                     "--out", str(folder), "--evidence", "held_out"]) == 2
    finally:
        client.set_terminated(finished_run.parent_run_id, "FINISHED")
    assert "has not finished (RUNNING)" in capsys.readouterr().err
    assert not folder.exists() and list(tmp_path.glob(".never*")) == []


def test_a_folder_holding_files_is_not_written_over_without_replace(study, finished_run, run_home):
    before = (study / MANIFEST).read_text()
    with pytest.raises(UserError, match="already holds files; pass --replace"):
        write_study(finished_run.parent_run_id, study, evidence="held_out", home=run_home)
    assert (study / MANIFEST).read_text() == before
    write_study(finished_run.parent_run_id, study, evidence="in_sample", home=run_home, replace=True)
    assert load_study(study).manifest.evidence == "in_sample"


def test_documentation_tables_come_from_the_study_and_drift_is_caught(written, tmp_path, capsys):
    root = written.parent
    page = tmp_path / "docs" / "findings.md"
    page.parent.mkdir()
    page.write_text("# Findings\n\nProse a person wrote.\n\n<!-- study: weak_tests vs=baseline -->\n"
                    "<!-- /study -->\n\n<!-- studies -->\n<!-- /studies -->\n")
    assert main(["study", "tables", str(page), "--root", str(root), "--check"]) == 1
    assert main(["study", "tables", str(page), "--root", str(root), "--docs", str(tmp_path / "docs")]) == 0
    assert "](studies/weak_tests.md)" in page.read_text()  # a page links to the site's study page
    assert main(["study", "tables", str(page), "--root", str(root)]) == 0
    text = page.read_text()
    assert "Prose a person wrote." in text and "held out: nothing reported here was chosen" in text
    assert "| vote | 0.600 (3/5) | [0.231, 0.882] |" in text and "| 0 / 0 | 1.000 |" in text
    assert f"]({os.path.relpath(root, page.parent)}/weak_tests)" in text
    capsys.readouterr()
    assert main(["study", "tables", str(page), "--root", str(root), "--check"]) == 0
    page.write_text(text.replace("0.600 (3/5)", "0.650 (3/5)", 1))  # a number typed over the data
    assert main(["study", "tables", str(page), "--root", str(root), "--check"]) == 1
    assert "differs from its studies" in capsys.readouterr().out


@pytest.mark.parametrize(("marker", "expected"), [
    ("<!-- study: weak_tests vs=debate -->", "has no arm 'debate'; its arms: baseline, vote"),
    ("<!-- study: weak_tests colour=red -->", "study block option 'colour=red'"),
    ("<!-- study: gone -->", "gone': no such folder"),
])
def test_a_bad_study_block_is_one_line_exit_2_and_the_file_unchanged(written, tmp_path, marker, expected,
                                                                        capsys):
    page = tmp_path / "page.md"
    page.write_text(f"{marker}\n<!-- /study -->\n")
    assert main(["study", "tables", str(page), "--root", str(written.parent)]) == 2
    assert expected in capsys.readouterr().err and page.read_text() == f"{marker}\n<!-- /study -->\n"
