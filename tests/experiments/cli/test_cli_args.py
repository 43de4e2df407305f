"""Ports and output directories are refused at the command line, one line and exit code 2,
before any work and without writing anything."""

from pathlib import Path

import pytest

from critiquelab.experiments.cli.main import main


@pytest.mark.parametrize("argv", [
    ["view", "--port", "99999"], ["view", "--port", "0"], ["ui", "--port", "-5"], ["ui", "--port", "http"],
])
def test_a_bad_port_is_one_line_exit_2(argv, capsys, home):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--port" in err and "Traceback" not in err
    assert not home.exists()


VERBS_WITH_OUT = [["view"], ["compare", "run-id"], ["export", "somewhere"],
                  ["rescore", "run-id", "--dataset", "humaneval"]]


@pytest.mark.parametrize("verb", VERBS_WITH_OUT)
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_output_directory_that_cannot_be_one_is_one_line_exit_2(verb, where, tmp_path, capsys, home):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    out = blocker if where == "a file" else blocker / "reports"
    assert main([*verb, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err and "Traceback" not in err
    assert blocker.read_text() == "x" and not home.exists()


@pytest.mark.parametrize("verb", VERBS_WITH_OUT)
@pytest.mark.parametrize("out", ["/sys/nope", "/proc/nope/x", "", "unwritable/reports"])
def test_an_output_directory_that_cannot_be_created_is_one_line_exit_2(verb, out, tmp_path, capsys, home,
                                                                        monkeypatch):
    """Permission bits do not say it (root may write anywhere, yet /sys and /proc refuse): the
    directory is tried, and the try leaves nothing behind. An empty path is refused, not taken
    as the current directory."""
    if out.startswith("/") and not Path("/", out.split("/")[1]).is_dir():
        pytest.skip(f"no /{out.split('/')[1]} here")
    if out.startswith("unwritable"):
        (tmp_path / "unwritable").mkdir()
        monkeypatch.setattr("critiquelab.experiments.paths.tempfile.mkdtemp", _refused)
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main([*verb, "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err and "Traceback" not in err, err
    assert sorted(tmp_path.rglob("*")) == before and not home.exists()


def _refused(*args, **kwargs):
    raise PermissionError(13, "Permission denied", kwargs.get("dir"))


@pytest.mark.parametrize("where", ["a file", "/proc/nope/home"])
def test_a_data_directory_from_the_environment_is_checked_like_home(where, tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    monkeypatch.setenv("CRITIQUELAB_HOME", str(blocker) if where == "a file" else where)
    assert main(["run", "experiments/baseline.yaml"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("critiquelab: error: $CRITIQUELAB_HOME: ")
    assert blocker.read_text() == "x" and sorted(tmp_path.iterdir()) == [blocker]
