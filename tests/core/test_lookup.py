"""A path the system cannot look up (a name too long, a symbolic-link loop) is one line naming
the path's role, for every verb that takes a path, and nothing is written."""

from __future__ import annotations

import pytest

from experiments.cli import main

GOOD = "name: x\npipelines: [{name: baseline}]\n"


@pytest.fixture
def paths(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(GOOD)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return spec, str(tmp_path / ("a" * 300)), str(tmp_path / "loop")


@pytest.mark.parametrize(("bad", "problem"), [(1, "File name too long"),
                                              (2, "Too many levels of symbolic links")])
def test_a_path_that_cannot_be_looked_up_is_one_line(paths, bad, problem, tmp_path, capsys):
    spec, path = paths[0], paths[bad]
    home = tmp_path / "home"
    commands = {
        "spec": (["run", path + ".yaml" if bad == 1 else path, "--estimate"], f"{path}"),
        "dataset": (["run", str(spec), "--dataset", path, "--estimate"], f"dataset '{path}'"),
        "prompts": (["run", str(spec), "--prompts", path, "--estimate"], path),
        "export": (["export", path], f"export '{path}'"),
    }
    for name, (argv, names) in commands.items():
        assert main(["--home", str(home), *argv]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and names in err[0] and problem in err[0], (name, err)
    assert not home.exists()
