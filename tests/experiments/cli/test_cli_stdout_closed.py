"""Standard output closed by its reader (``critiquelab pipelines | head -1``): the command ends
quietly, exit code 141 (a command killed by SIGPIPE in a shell), no traceback and no "Exception
ignored" at interpreter exit. Driven through real processes whose stdout pipe has no reader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.viewer_run import viewer_run

from critiquelab.experiments.cli.main import STDOUT_CLOSED, main

ROOT = Path(__file__).resolve().parents[3]


def _with_stdout_closed(home: Path, *argv: str) -> subprocess.CompletedProcess:
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write to stdout fails with EPIPE
    try:
        return subprocess.run([sys.executable, "-m", "critiquelab.experiments.cli", "--home", str(home),
                               *argv],
                              stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)


@pytest.mark.parametrize("argv", [["pipelines"], ["models", "list"]])
def test_a_closed_stdout_ends_quietly(argv, tmp_path):
    done = _with_stdout_closed(tmp_path / "home", *argv)
    assert (done.returncode, done.stderr) == (STDOUT_CLOSED, "")


def test_compare_into_a_closed_stdout_ends_quietly(tmp_path, humaneval_problems):
    home = tmp_path / "home"
    result = viewer_run(home, humaneval_problems)
    done = _with_stdout_closed(home, "compare", result.parent_run_id, "--no-log", "--out",
                               str(tmp_path / "report"))
    assert (done.returncode, done.stderr) == (STDOUT_CLOSED, "")


def test_a_broken_pipe_of_the_commands_own_is_not_hidden(monkeypatch, home):
    """Only a closed stdout is quiet: any other pipe breaking is a bug, and shows."""
    def breaks(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setitem(sys.modules["critiquelab.experiments.cli.commands"].HANDLERS, "pipelines", breaks)
    with pytest.raises(BrokenPipeError):
        main(["pipelines"])
