"""A path the system cannot look up (a name too long, a symbolic-link loop) is one line naming
the path's role, for every verb that takes a path, and nothing is written."""

from __future__ import annotations

import pytest

from critiquelab.experiments.cli.main import main

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


def test_a_tilde_naming_no_user_stays_as_written_as_a_shell_leaves_it(tmp_path, capsys, monkeypatch):
    """``Path.expanduser`` raises for ``~name`` with no such user; every path option reads it as
    the shell does (literally), so a missing one is "not found", not a traceback."""
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(GOOD)
    missing = "~no-such-user-xyz/d.jsonl"
    commands = {
        "dataset": (["run", str(spec), "--dataset", missing, "--estimate"], f"dataset '{missing}' not found"),
        "compare --out": (["compare", "abc", "--out", "~no-such-user-xyz/out"], "no MLflow store"),
        "rescore --dataset": (["rescore", "abc", "--dataset", missing], "dataset"),
    }
    for name, (argv, expected) in commands.items():
        assert main(["--home", str(tmp_path / "home"), *argv]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], (name, err)
    monkeypatch.setenv("CRITIQUELAB_HOME", "~no-such-user-xyz/home")
    assert main(["run", str(spec), "--estimate"]) == 0  # a data directory named literally
    assert not (tmp_path / "home").exists() and not (tmp_path / "~no-such-user-xyz").exists()


def test_an_empty_export_target_is_refused_not_read_as_the_working_directory(tmp_path, capsys):
    assert main(["--home", str(tmp_path / "home"), "export", ""]) == 2
    assert capsys.readouterr().err.strip() == ("critiquelab: error: export '': an empty target; give an "
                                               "export directory, a program.json or a run id")
    assert not (tmp_path / "home").exists()
