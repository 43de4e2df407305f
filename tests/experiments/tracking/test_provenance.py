"""Provenance reads the checkout it runs from and writes nothing to it."""

import os
import subprocess

from critiquelab.experiments.tracking import provenance


def test_the_commit_is_read_without_touching_the_checkouts_git_directory(tmp_path, monkeypatch):
    repo = tmp_path / "checkout"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    index = repo / ".git" / "index"
    os.utime(repo / "a.py", (1, 1))  # a stale stat: a plain `git status` would rewrite the index
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    monkeypatch.setattr(provenance, "PROJECT_ROOT", repo)

    assert provenance.git_commit() == head
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before

    (repo / "a.py").write_text("x = 2\n")
    assert provenance.git_commit() == f"{head}-dirty"
