"""Ports and output directories are refused at the command line, one line and exit code 2,
before any work and without writing anything."""

import pytest

from experiments.cli import main


@pytest.mark.parametrize("argv", [
    ["view", "--port", "99999"], ["view", "--port", "0"], ["ui", "--port", "-5"], ["ui", "--port", "http"],
])
def test_a_bad_port_is_one_line_exit_2(argv, capsys, home):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--port" in err and "Traceback" not in err
    assert not home.exists()


@pytest.mark.parametrize("verb", [["view"], ["compare", "run-id"], ["export", "somewhere"]])
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_output_directory_that_cannot_be_one_is_one_line_exit_2(verb, where, tmp_path, capsys, home):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    out = blocker if where == "a file" else blocker / "reports"
    assert main([*verb, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err and "Traceback" not in err
    assert blocker.read_text() == "x" and not home.exists()
