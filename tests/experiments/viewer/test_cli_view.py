"""``critiquelab view``: static export, and bad input as one line with exit code 2."""

import socket

from experiments.cli import main


def test_view_out_writes_pages_that_open_from_disk(viewer_home, tmp_path, capsys):
    home, result = viewer_home
    out = tmp_path / "site"
    assert main(["view", result.parent_run_id, "--home", str(home), "--out", str(out)]) == 0
    assert "wrote 11 pages" in capsys.readouterr().out
    index = (out / "index.html").read_text()
    for child in result.children:
        assert f'href="runs/{child.run_id}.html"' in index
        assert (out / "runs" / f"{child.run_id}.html").is_file()


def test_view_bad_input_is_one_line_and_writes_nothing(viewer_home, tmp_path, capsys):
    home, _ = viewer_home
    empty = tmp_path / "empty"
    assert main(["view", "--home", str(empty)]) == 2
    assert f"view: no MLflow store at {empty / 'mlflow.db'} yet" in capsys.readouterr().err
    assert not empty.exists()
    assert main(["view", "nosuchrun", "--home", str(home)]) == 2
    assert "no such run" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert main(["view", "--home", str(home), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1
